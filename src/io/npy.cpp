// .npy reader and writer. Header: "\x93NUMPY", major, minor, header length (u16 for v1,
// u32 for v2/v3), then a Python dict literal {'descr': '<f4', 'fortran_order': False,
// 'shape': (2, 3), } padded with spaces to a multiple of 64 bytes and ended by '\n'.
#include "src/io/npy.h"

#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "src/io/atomic_file.h"
#include "src/ops/ops.h"

namespace gdn::io {

namespace {

std::string dict_value(const std::string& header, const std::string& key, const std::string& path) {
  auto pos = header.find("'" + key + "'");
  GDN_CHECK(pos != std::string::npos, path, ": npy header has no '", key, "': ", header);
  pos = header.find(':', pos);
  GDN_CHECK(pos != std::string::npos, path, ": malformed npy header: ", header);
  ++pos;
  while (pos < header.size() && header[pos] == ' ') ++pos;
  size_t end = pos;
  if (header[pos] == '(') {
    end = header.find(')', pos);
    GDN_CHECK(end != std::string::npos, path, ": malformed shape in npy header: ", header);
    ++end;
  } else if (header[pos] == '\'') {
    end = header.find('\'', pos + 1);
    GDN_CHECK(end != std::string::npos, path, ": malformed npy header: ", header);
    ++end;
  } else {
    while (end < header.size() && header[end] != ',' && header[end] != '}') ++end;
  }
  return header.substr(pos, end - pos);
}

}  // namespace

Tensor load_npy(const std::string& path) {
  const std::string data = read_regular_file(path);  // names a directory or FIFO
  GDN_CHECK(data.size() >= 10 && std::memcmp(data.data(), "\x93NUMPY", 6) == 0, path,
            ": not a .npy file (bad magic at offset 0)");
  const int major = uint8_t(data[6]);
  GDN_CHECK(major >= 1 && major <= 3, path, ": unsupported npy version ", major);
  size_t header_len, header_start;
  if (major == 1) {
    header_len = uint8_t(data[8]) | (size_t(uint8_t(data[9])) << 8);
    header_start = 10;
  } else {
    GDN_CHECK(data.size() >= 12, path, ": truncated npy header");
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= size_t(uint8_t(data[8 + i])) << (8 * i);
    header_start = 12;
  }
  GDN_CHECK(header_start + header_len <= data.size(), path, ": truncated npy header (", data.size(),
            " bytes, header ends at ", header_start + header_len, ")");
  const std::string header = data.substr(header_start, header_len);
  const std::string descr = dict_value(header, "descr", path);
  const std::string fortran = dict_value(header, "fortran_order", path);
  const std::string shape_str_v = dict_value(header, "shape", path);
  GDN_CHECK(fortran.find("False") == 0, path, ": Fortran-order arrays are not supported");

  Shape shape;
  for (size_t i = 0; i < shape_str_v.size();) {  // the integers of "(2, 3)"
    if (!std::isdigit(static_cast<unsigned char>(shape_str_v[i]))) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < shape_str_v.size() && std::isdigit(static_cast<unsigned char>(shape_str_v[j]))) ++j;
    shape.push_back(std::stoll(shape_str_v.substr(i, j - i)));
    i = j;
  }

  DType dtype;
  size_t item = 0;
  bool widen_unsigned = false;
  std::string d = descr.substr(1, descr.size() - 2);  // strip quotes
  if (d == "<f4")
    dtype = DType::float32, item = 4;
  else if (d == "<f8")
    dtype = DType::float64, item = 8;
  else if (d == "<f2")
    dtype = DType::float16, item = 2;
  else if (d == "<i4")
    dtype = DType::int32, item = 4;
  else if (d == "<i8")
    dtype = DType::int64, item = 8;
  else if (d == "|u1" || d == "<u2" || d == "<u4")
    dtype = DType::int64, item = d == "|u1" ? 1 : (d == "<u2" ? 2 : 4), widen_unsigned = true;
  else
    GDN_FAIL(path, ": unsupported npy dtype ", descr,
             " (expected <f2, <f4, <f8, <i4, <i8, |u1, <u2 or <u4, little-endian)");

  const size_t offset = header_start + header_len;
  const size_t want = size_t(shape_numel(shape)) * item;
  GDN_CHECK(data.size() - offset == want, path, ": data is ", data.size() - offset,
            " bytes from offset ", offset, " but shape ", gdn::shape_str(shape), " of ", d,
            " needs ", want);
  Tensor t = ops::empty(shape, dtype, Device::cpu());
  if (!widen_unsigned) {
    std::memcpy(t.data_ptr(), data.data() + offset, want);
  } else {
    int64_t* out = t.data<int64_t>();
    const unsigned char* src = reinterpret_cast<const unsigned char*>(data.data() + offset);
    for (int64_t i = 0; i < t.numel(); ++i) {
      uint64_t v = 0;
      for (size_t b = 0; b < item; ++b) v |= uint64_t(src[size_t(i) * item + b]) << (8 * b);
      out[i] = int64_t(v);
    }
  }
  return t;
}

std::vector<int64_t> integer_values(const Tensor& t_in) {
  GDN_CHECK(t_in.dtype() == DType::int32 || t_in.dtype() == DType::int64,
            "integer_values: int32 or int64 expected, got ", dtype_name(t_in.dtype()));
  const Tensor t = ops::contiguous(ops::to_device(t_in, Device::cpu()));
  std::vector<int64_t> out(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i)
    out[size_t(i)] = t.dtype() == DType::int64 ? t.data<int64_t>()[i] : t.data<int32_t>()[i];
  return out;
}

void save_npy(const std::string& path, const Tensor& t_in) {
  Tensor t = ops::contiguous(ops::to_device(t_in.detach(), Device::cpu()));
  if (t.dtype() == DType::bfloat16) t = ops::cast(t, DType::float32);
  const char* descr = nullptr;
  switch (t.dtype()) {
    case DType::float32:
      descr = "<f4";
      break;
    case DType::float64:
      descr = "<f8";
      break;
    case DType::float16:
      descr = "<f2";
      break;
    case DType::int32:
      descr = "<i4";
      break;
    case DType::int64:
      descr = "<i8";
      break;
    default:
      GDN_FAIL("save_npy: unsupported dtype ", dtype_name(t.dtype()));
  }
  // Python tuple syntax: (), (3,), (2, 3)
  std::string shape = "(";
  for (size_t i = 0; i < t.shape().size(); ++i)
    shape += (i ? ", " : "") + std::to_string(t.shape()[i]);
  shape += t.shape().size() == 1 ? ",)" : ")";
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  const std::string tmp = temp_path_for(path);
  {
    std::ofstream f(tmp, std::ios::binary);
    GDN_CHECK(f, "cannot write '", tmp, "'");
    f.write("\x93NUMPY\x01\x00", 8);
    const uint16_t len = uint16_t(header.size());
    const char lenb[2] = {char(len & 0xff), char(len >> 8)};
    f.write(lenb, 2);
    f.write(header.data(), std::streamsize(header.size()));
    f.write(static_cast<const char*>(t.data_ptr()), std::streamsize(t.nbytes()));
    GDN_CHECK(f.good(), "error writing '", tmp, "'");
  }
  GDN_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename '", tmp, "' to '", path,
            "'");
}

}  // namespace gdn::io
