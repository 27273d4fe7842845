#include "headcount/model/safetensors.h"

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include "headcount/common/check.h"
#include "headcount/common/io.h"

namespace headcount::model {

namespace {

struct Dtype {
  const char* name;
  torch::ScalarType type;
};
constexpr Dtype kDtypes[] = {{"F64", torch::kFloat64}, {"F32", torch::kFloat32},
                             {"F16", torch::kFloat16}, {"BF16", torch::kBFloat16},
                             {"I64", torch::kInt64},   {"I32", torch::kInt32},
                             {"I16", torch::kInt16},   {"I8", torch::kInt8},
                             {"U8", torch::kUInt8},    {"BOOL", torch::kBool}};

torch::ScalarType dtype_of(const std::string& name, const std::string& where) {
  for (const auto& d : kDtypes)
    if (name == d.name) return d.type;
  std::vector<std::string> known;
  for (const auto& d : kDtypes) known.emplace_back(d.name);
  HC_FAIL("{}: dtype \"{}\" is not one headcount reads (expected one of {})", where, name,
          fmt::join(known, ", "));
}

const char* name_of(torch::ScalarType t, const std::string& where) {
  for (const auto& d : kDtypes)
    if (t == d.type) return d.name;
  HC_FAIL("{}: a tensor of type {} has no safetensors dtype here", where, c10::toString(t));
}

uint64_t read_u64_le(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// One header entry, checked against the buffer of `buffer_size` bytes.
struct Entry {
  std::string name;
  torch::ScalarType type;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

Entry parse_entry(const std::string& name, const nlohmann::json& v, uint64_t buffer_size,
                  const std::string& file) {
  const std::string where = fmt::format("{}: tensor \"{}\"", file, name);
  HC_CHECK(
      v.is_object() && v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"),
      "{}: expected {{\"dtype\", \"shape\", \"data_offsets\"}}, got {}", where, v.dump());
  Entry e;
  e.name = name;
  HC_CHECK(v["dtype"].is_string(), "{}: dtype is {}, expected a string", where, v["dtype"].dump());
  e.type = dtype_of(v["dtype"].get<std::string>(), where);
  const auto& shape = v["shape"];
  HC_CHECK(shape.is_array(), "{}: shape is {}, expected a list of sizes", where, shape.dump());
  uint64_t count = 1;
  for (const auto& s : shape) {
    HC_CHECK(s.is_number_unsigned() && s.get<uint64_t>() < (uint64_t{1} << 40),
             "{}: shape {} holds {}, expected sizes from 0", where, shape.dump(), s.dump());
    e.shape.push_back(s.get<int64_t>());
    count *= s.get<uint64_t>();
    HC_CHECK(count < (uint64_t{1} << 50), "{}: shape {} is too large", where, shape.dump());
  }
  const auto& off = v["data_offsets"];
  HC_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() &&
               off[1].is_number_unsigned(),
           "{}: data_offsets is {}, expected [BEGIN, END]", where, off.dump());
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  HC_CHECK(e.begin <= e.end && e.end <= buffer_size,
           "{}: data_offsets [{}, {}] lie outside the {}-byte data buffer (the file is cut short "
           "or damaged?)",
           where, e.begin, e.end, buffer_size);
  const uint64_t bytes = count * c10::elementSize(e.type);
  HC_CHECK(e.end - e.begin == bytes,
           "{}: data_offsets [{}, {}] hold {} bytes, but dtype {} and shape {} need {}", where,
           e.begin, e.end, e.end - e.begin, v["dtype"].get<std::string>(), shape.dump(), bytes);
  return e;
}

}  // namespace

SafetensorsFile read_safetensors(const fs::path& path) {
  const std::string file = path.string();
  const std::string bytes = io::read_file(path);
  HC_CHECK(bytes.size() >= 8,
           "{}: {} bytes, not a safetensors file (it starts with an 8-byte "
           "header length)",
           file, bytes.size());
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  const uint64_t n = read_u64_le(data);
  HC_CHECK(n <= bytes.size() - 8 && n <= (uint64_t{100} << 20),
           "{}: header length {} does not fit the file's {} bytes (not a safetensors file?)", file,
           n, bytes.size());
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<int64_t>(n));
  } catch (const nlohmann::json::exception& e) {
    HC_FAIL("{}: the header is not JSON ({})", file, e.what());
  }
  HC_CHECK(header.is_object(), "{}: the header is {}, expected a JSON object", file,
           header.type_name());
  const uint64_t buffer_size = bytes.size() - 8 - n;
  SafetensorsFile out;
  std::vector<Entry> entries;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      HC_CHECK(v.is_object(), "{}: __metadata__ is {}, expected an object of strings", file,
               v.dump());
      for (const auto& [k, s] : v.items()) {
        HC_CHECK(s.is_string(), "{}: __metadata__ \"{}\" is {}, expected a string", file, k,
                 s.dump());
        out.metadata[k] = s.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(name, v, buffer_size, file));
  }
  // The buffer is indexed entirely, without overlaps or holes.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
  });
  uint64_t at = 0;
  for (const auto& e : entries) {
    HC_CHECK(e.begin == at,
             "{}: tensor \"{}\" starts at byte {} of the data buffer, expected {} "
             "({} the previous tensor)",
             file, e.name, e.begin, at, e.begin < at ? "overlapping" : "a hole after");
    at = e.end;
  }
  HC_CHECK(at == buffer_size, "{}: the tensors end at byte {} of a {}-byte data buffer", file, at,
           buffer_size);
  const unsigned char* buffer = data + 8 + n;
  for (const auto& e : entries) {
    auto t = torch::empty(e.shape, torch::TensorOptions().dtype(e.type));  // device: cpu (read)
    if (e.end > e.begin) std::memcpy(t.data_ptr(), buffer + e.begin, e.end - e.begin);
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

void write_safetensors(const fs::path& path, const SafetensorsFile& content) {
  const std::string file = path.string();
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!content.metadata.empty()) header["__metadata__"] = content.metadata;
  std::set<std::string> names;
  std::vector<torch::Tensor> data;
  uint64_t at = 0;
  for (const auto& [name, tensor] : content.tensors) {
    HC_CHECK(name != "__metadata__" && names.insert(name).second,
             "{}: tensor name \"{}\" is reserved or given twice", file, name);
    const std::string where = fmt::format("{}: tensor \"{}\"", file, name);
    const auto t = tensor.detach().to(torch::kCPU).contiguous();
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    header[name] = {{"dtype", name_of(t.scalar_type(), where)},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {at, at + bytes}}};
    at += bytes;
    data.push_back(t);
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // the data buffer starts 8-byte aligned
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((h.size() >> (8 * i)) & 0xff);
  out += h;
  out.reserve(out.size() + at);
  for (const auto& t : data)
    out.append(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size());
  io::write_file_atomic(path, out);
}

}  // namespace headcount::model
