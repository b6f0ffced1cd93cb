// safetensors reader and writer.
#include "src/io/safetensors.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "src/ops/ops.h"

namespace gdn::io {

namespace {

const char* st_dtype(DType d) {
  switch (d) {
    case DType::float32:
      return "F32";
    case DType::float64:
      return "F64";
    case DType::bfloat16:
      return "BF16";
    case DType::float16:
      return "F16";
    case DType::int32:
      return "I32";
    case DType::int64:
      return "I64";
  }
  return "?";
}

bool parse_st_dtype(const std::string& s, DType* out) {
  static const std::map<std::string, DType> m = {{"F32", DType::float32},   {"F64", DType::float64},
                                                 {"BF16", DType::bfloat16}, {"F16", DType::float16},
                                                 {"I32", DType::int32},     {"I64", DType::int64}};
  auto it = m.find(s);
  if (it == m.end()) return false;
  *out = it->second;
  return true;
}

}  // namespace

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata, std::optional<DType> as) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<Tensor> host;
  size_t offset = 0;
  for (const auto& [name, t] : tensors) {
    GDN_CHECK(!t.device().is_meta(), "save_safetensors: '", name, "' is a meta tensor (no data)");
    Tensor h = ops::contiguous(ops::to_device(t.detach(), Device::cpu()));
    if (as) h = ops::cast(h, *as);
    h = ops::contiguous(h);
    header[name] = {{"dtype", st_dtype(h.dtype())},
                    {"shape", h.shape()},
                    {"data_offsets", {offset, offset + h.nbytes()}}};
    offset += h.nbytes();
    host.push_back(h);
  }
  std::string hs = header.dump();
  hs.append((8 - hs.size() % 8) % 8, ' ');
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    GDN_CHECK(f, "cannot write '", tmp, "'");
    uint64_t n = hs.size();
    char len[8];
    for (int i = 0; i < 8; ++i) len[i] = char((n >> (8 * i)) & 0xff);
    f.write(len, 8);
    f.write(hs.data(), std::streamsize(hs.size()));
    for (const Tensor& h : host)
      f.write(static_cast<const char*>(h.data_ptr()), std::streamsize(h.nbytes()));
    f.flush();
    GDN_CHECK(f.good(), "error writing '", tmp, "' (disk full?)");
  }
  GDN_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename '", tmp, "' to '", path,
            "'");
}

NamedTensors load_safetensors(const std::string& path,
                              std::map<std::string, std::string>* metadata) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  GDN_CHECK(f, "cannot open '", path, "'");
  const uint64_t file_size = uint64_t(f.tellg());
  f.seekg(0);
  GDN_CHECK(file_size >= 8, path, ": truncated (", file_size,
            " bytes, the header length alone is 8)");
  unsigned char len[8];
  f.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(len[i]) << (8 * i);
  GDN_CHECK(n <= file_size - 8, path, ": header length ", n, " at offset 0 exceeds the file (",
            file_size, " bytes): truncated or not a safetensors file");
  std::string hs(n, '\0');
  f.read(hs.data(), std::streamsize(n));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(hs);
  } catch (const nlohmann::json::exception& e) {
    GDN_FAIL(path, ": the JSON header (offset 8, ", n, " bytes) does not parse: ", e.what());
  }
  GDN_CHECK(header.is_object(), path, ": the header is not a JSON object");
  const uint64_t data_start = 8 + n, data_size = file_size - data_start;
  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (metadata)
        for (auto m = it->begin(); m != it->end(); ++m)
          (*metadata)[m.key()] = m->is_string() ? m->get<std::string>() : m->dump();
      continue;
    }
    Entry e;
    e.name = it.key();
    const auto& v = it.value();
    GDN_CHECK(
        v.is_object() && v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"),
        path, ": tensor '", e.name, "' lacks dtype, shape or data_offsets");
    GDN_CHECK(parse_st_dtype(v["dtype"].get<std::string>(), &e.dtype), path, ": tensor '", e.name,
              "' has unsupported dtype ", v["dtype"].dump());
    e.shape = v["shape"].get<Shape>();
    e.begin = v["data_offsets"][0].get<uint64_t>();
    e.end = v["data_offsets"][1].get<uint64_t>();
    const uint64_t want = uint64_t(shape_numel(e.shape)) * dtype_size(e.dtype);
    GDN_CHECK(e.end >= e.begin && e.end - e.begin == want, path, ": tensor '", e.name, "' ",
              shape_str(e.shape), " ", v["dtype"].get<std::string>(), " needs ", want,
              " bytes but data_offsets are [", e.begin, ", ", e.end, ")");
    GDN_CHECK(e.end <= data_size, path, ": tensor '", e.name, "' ends at file offset ",
              data_start + e.end, " beyond the end of the file (", file_size, " bytes): truncated");
    entries.push_back(e);
  }
  NamedTensors out;
  for (const Entry& e : entries) {
    Tensor t = ops::empty(e.shape, e.dtype, Device::cpu());
    f.seekg(std::streamoff(data_start + e.begin));
    f.read(static_cast<char*>(t.data_ptr()), std::streamsize(e.end - e.begin));
    GDN_CHECK(f.good(), path, ": read error in tensor '", e.name, "' at offset ",
              data_start + e.begin);
    out.emplace_back(e.name, t);
  }
  return out;
}

}  // namespace gdn::io
