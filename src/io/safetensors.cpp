// safetensors reader and writer.
#include "src/io/safetensors.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "src/io/atomic_file.h"
#include "src/io/file_check.h"
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
  const std::string tmp = temp_path_for(path);
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
  std::ifstream f = open_for_reading(path, "safetensors file");
  f.seekg(0, std::ios::end);
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
  GDN_CHECK(f.good(), path, ": read error in the JSON header (offset 8, ", n, " bytes)");
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
      GDN_CHECK(it->is_object(), path, ": __metadata__ is not a JSON object but ", it->dump());
      if (metadata)
        for (auto m = it->begin(); m != it->end(); ++m)
          (*metadata)[m.key()] = m->is_string() ? m->get<std::string>() : m->dump();
      continue;
    }
    Entry e;
    e.name = it.key();
    const auto& v = it.value();
    const std::string where = path + ": tensor '" + e.name + "'";
    GDN_CHECK(
        v.is_object() && v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"),
        where, " lacks dtype, shape or data_offsets");
    // Every field's type is checked here, so no nlohmann type_error (with no file) escapes.
    GDN_CHECK(v["dtype"].is_string() && parse_st_dtype(v["dtype"].get<std::string>(), &e.dtype),
              where, " has unsupported dtype ", v["dtype"].dump(),
              " (expected F32, F64, BF16, F16, I32 or I64)");
    const auto& shape = v["shape"];
    GDN_CHECK(shape.is_array(), where, ": shape must be a list of sizes, got ", shape.dump());
    uint64_t numel = 1;
    bool overflow = false;
    for (const auto& d : shape) {
      GDN_CHECK(d.is_number_unsigned(), where, ": shape ", shape.dump(),
                " must hold non-negative integers");
      const uint64_t x = d.get<uint64_t>();
      GDN_CHECK(x <= uint64_t(INT64_MAX), where, ": size ", x, " in shape ", shape.dump(),
                " is out of range");
      if (x != 0 && numel > UINT64_MAX / x) overflow = true;
      numel *= x;
      e.shape.push_back(int64_t(x));
    }
    const auto& off = v["data_offsets"];
    GDN_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() &&
                  off[1].is_number_unsigned(),
              where, ": data_offsets must be [begin, end] (two non-negative integers), got ",
              off.dump());
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    const uint64_t esize = uint64_t(dtype_size(e.dtype));
    overflow = overflow || (numel != 0 && numel > UINT64_MAX / esize);
    GDN_CHECK(!overflow, where, ": shape ", shape.dump(), " is too large");
    const uint64_t want = numel * esize;
    GDN_CHECK(e.end >= e.begin, where, ": data_offsets [", e.begin, ", ", e.end,
              ") are out of order (end before begin)");
    GDN_CHECK(e.end - e.begin == want, where, " ", shape_str(e.shape), " ",
              v["dtype"].get<std::string>(), " needs ", want, " bytes but data_offsets are [",
              e.begin, ", ", e.end, ") (", e.end - e.begin, " bytes)");
    GDN_CHECK(e.end <= data_size, where, " ends at file offset ", data_start + e.end,
              " beyond the end of the file (", file_size, " bytes): truncated");
    entries.push_back(e);
  }
  // The tensors must tile the data exactly, as the reference reader requires: sorted by offset,
  // each begins where the one before ends, and the last ends at the end of the file. An overlap
  // would hand one tensor another's bytes.
  std::vector<const Entry*> order;
  for (const Entry& e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t at = 0;
  const Entry* prev = nullptr;
  for (const Entry* e : order) {
    GDN_CHECK(e->begin >= at, path, ": tensor '", e->name, "' data_offsets [", e->begin, ", ",
              e->end, ") overlap tensor '", prev ? prev->name : "", "' [", prev ? prev->begin : 0,
              ", ", at, ")");
    GDN_CHECK(e->begin == at, path, ": ", e->begin - at, " bytes of the data at [", at, ", ",
              e->begin, ") belong to no tensor (a gap before tensor '", e->name, "')");
    at = e->end;
    prev = e;
  }
  GDN_CHECK(at == data_size, path, ": ", data_size - at, " bytes after the last tensor",
            prev ? " '" + prev->name + "'" : std::string(), " (data ends at ", at, ", the file at ",
            data_size, ") belong to no tensor");
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
