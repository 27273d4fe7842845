#include "headcount/interop/npz.h"

#include <fmt/format.h>
#include <minizip/unzip.h>

#include <cstring>
#include <regex>
#include <vector>

#include "headcount/common/check.h"

namespace headcount::interop {

namespace {

struct Dtype {
  torch::ScalarType type;
  size_t size;
};

Dtype dtype_of(const std::string& descr, const std::string& what) {
  HC_CHECK(descr.size() >= 3, "{}: unknown dtype '{}'", what, descr);
  const char order = descr[0], kind = descr[1];
  const std::string bytes = descr.substr(2);
  HC_CHECK(order != '>' || bytes == "1",
           "{}: dtype '{}' is big-endian; write the array little-endian (numpy: "
           "a.astype(a.dtype.newbyteorder('<')))",
           what, descr);
  HC_CHECK(order == '<' || order == '|' || order == '=' || order == '>', "{}: unknown dtype '{}'",
           what, descr);
  const std::string k = std::string(1, kind) + bytes;
  if (k == "f2") return {torch::kHalf, 2};
  if (k == "f4") return {torch::kFloat32, 4};
  if (k == "f8") return {torch::kFloat64, 8};
  if (k == "i1") return {torch::kInt8, 1};
  if (k == "i2") return {torch::kInt16, 2};
  if (k == "i4") return {torch::kInt32, 4};
  if (k == "i8") return {torch::kInt64, 8};
  if (k == "u1") return {torch::kByte, 1};
  if (k == "b1") return {torch::kBool, 1};
  HC_FAIL("{}: dtype '{}' is not one headcount reads (float 2/4/8 bytes, int 1/2/4/8, uint8, bool)",
          what, descr);
}

// The value of 'key' in the header's Python dict literal, as text.
std::string header_field(const std::string& header, const std::string& key,
                         const std::string& pattern, const std::string& what) {
  std::smatch m;
  const std::regex re("['\"]" + key + "['\"]\\s*:\\s*(" + pattern + ")");
  HC_CHECK(std::regex_search(header, m, re), "{}: the .npy header has no '{}' ({})", what, key,
           header);
  return m[1].str();
}

}  // namespace

torch::Tensor parse_npy(const std::string& bytes, const std::string& what) {
  static const std::string kMagic = "\x93NUMPY";
  HC_CHECK(bytes.size() >= 10 && bytes.compare(0, 6, kMagic) == 0,
           "{}: not a .npy array (no \\x93NUMPY magic)", what);
  const auto major = static_cast<unsigned char>(bytes[6]);
  HC_CHECK(major >= 1 && major <= 3, "{}: .npy format version {} (expected 1, 2 or 3)", what,
           major);
  size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) |
                 (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    start = 10;
  } else {
    HC_CHECK(bytes.size() >= 12, "{}: truncated .npy header", what);
    for (int i = 0; i < 4; ++i)
      header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    start = 12;
  }
  HC_CHECK(bytes.size() >= start + header_len, "{}: truncated .npy header ({} bytes announced)",
           what, header_len);
  const std::string header = bytes.substr(start, header_len);
  const std::string descr = header_field(header, "descr", "'[^']*'|\"[^\"]*\"", what);
  const Dtype dt = dtype_of(descr.substr(1, descr.size() - 2), what);
  const bool fortran = header_field(header, "fortran_order", "True|False", what) == "True";
  const std::string shape_text = header_field(header, "shape", "\\([^)]*\\)", what);
  std::vector<int64_t> shape;
  const std::regex dim("\\d+");
  for (auto it = std::sregex_iterator(shape_text.begin(), shape_text.end(), dim);
       it != std::sregex_iterator(); ++it)
    shape.push_back(std::stoll(it->str()));
  int64_t count = 1;
  for (const auto d : shape) {
    HC_CHECK(d < (int64_t{1} << 40) && (d == 0 || count <= (int64_t{1} << 40) / d),
             "{}: shape {} is too large", what, shape_text);
    count *= d;
  }
  const size_t data_bytes = static_cast<size_t>(count) * dt.size;
  const size_t have = bytes.size() - start - header_len;
  HC_CHECK(have == data_bytes, "{}: shape {} of {} needs {} bytes of data, the file holds {}", what,
           shape_text, descr, data_bytes, have);
  // Fortran order: the data is the C-order array of the reversed shape, transposed.
  std::vector<int64_t> stored(shape.rbegin(), shape.rend());
  auto t = torch::empty(fortran ? stored : shape, torch::TensorOptions().dtype(dt.type));
  if (data_bytes > 0) std::memcpy(t.data_ptr(), bytes.data() + start + header_len, data_bytes);
  if (fortran && shape.size() > 1) {
    std::vector<int64_t> reverse(shape.size());
    for (size_t i = 0; i < reverse.size(); ++i)
      reverse[i] = static_cast<int64_t>(reverse.size() - 1 - i);
    t = t.permute(reverse).contiguous();
  }
  return t;
}

std::map<std::string, torch::Tensor> read_npz(const std::filesystem::path& file) {
  std::error_code ec;
  HC_CHECK(std::filesystem::is_regular_file(file, ec), "{}: no such file", file.string());
  unzFile zip = unzOpen64(file.string().c_str());
  HC_CHECK(zip != nullptr, "{}: not a zip archive (.npz)", file.string());
  std::map<std::string, torch::Tensor> out;
  try {
    for (int rc = unzGoToFirstFile(zip); rc != UNZ_END_OF_LIST_OF_FILE; rc = unzGoToNextFile(zip)) {
      HC_CHECK(rc == UNZ_OK, "{}: unreadable zip directory (error {})", file.string(), rc);
      unz_file_info64 info;
      char name[1024];
      HC_CHECK(
          unzGetCurrentFileInfo64(zip, &info, name, sizeof(name), nullptr, 0, nullptr, 0) == UNZ_OK,
          "{}: unreadable zip entry", file.string());
      std::string member(name);
      const std::string what = fmt::format("{}: {}", file.string(), member);
      HC_CHECK(member.size() > 4 && member.compare(member.size() - 4, 4, ".npy") == 0,
               "{}: an .npz holds .npy members only", what);
      HC_CHECK(info.uncompressed_size < (uint64_t{1} << 40), "{}: {} bytes is too large", what,
               info.uncompressed_size);
      std::string bytes(static_cast<size_t>(info.uncompressed_size), '\0');
      HC_CHECK(unzOpenCurrentFile(zip) == UNZ_OK, "{}: cannot open the member", what);
      size_t got = 0;
      while (got < bytes.size()) {
        const unsigned chunk = static_cast<unsigned>(std::min<size_t>(bytes.size() - got, 1 << 30));
        const int n = unzReadCurrentFile(zip, bytes.data() + got, chunk);
        HC_CHECK(n > 0, "{}: truncated or corrupt member ({} of {} bytes read)", what, got,
                 bytes.size());
        got += static_cast<size_t>(n);
      }
      HC_CHECK(unzCloseCurrentFile(zip) == UNZ_OK, "{}: corrupt member (CRC mismatch)", what);
      member.resize(member.size() - 4);
      HC_CHECK(!out.count(member), "{}: two members named {}.npy", file.string(), member);
      out[member] = parse_npy(bytes, what);
    }
  } catch (...) {
    unzClose(zip);
    throw;
  }
  unzClose(zip);
  return out;
}

}  // namespace headcount::interop
