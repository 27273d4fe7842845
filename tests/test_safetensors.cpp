// The safetensors reader and writer against files made by other code: the tiny MarianMT folder's
// model.safetensors (written by tests/reference/marian_reference.py) against the same weights in
// its pytorch_model.bin (torch.save, read here by LibTorch's own unpickler), a file assembled byte
// by byte in this test, and every malformed variant a damaged download gives.
#include <gtest/gtest.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include <cstring>

#include "headcount/common/io.h"
#include "headcount/model/safetensors.h"
#include "test_util.h"

namespace headcount {
namespace {

using testing::TempDir;

std::string u64_le(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// A file from a header and a data buffer, as the format lays them out.
std::string file_of(const std::string& header, const std::string& buffer) {
  return u64_le(header.size()) + header + buffer;
}

std::string floats(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

TEST(Safetensors, MarianFixtureEqualsItsTorchSaveCopy) {
  const auto dir = testing::test_data("marian-tiny");
  const auto st = model::read_safetensors(dir / "model.safetensors");
  EXPECT_EQ(st.metadata.at("format"), "pt");
  const auto bin = io::read_file(dir / "pytorch_model.bin");
  const auto dict = torch::pickle_load(std::vector<char>(bin.begin(), bin.end())).toGenericDict();
  ASSERT_GT(st.tensors.size(), 20u);
  for (const auto& [name, t] : st.tensors) {
    ASSERT_TRUE(dict.contains(name)) << name;
    const auto ref = dict.at(name).toTensor();
    EXPECT_EQ(t.sizes(), ref.sizes()) << name;
    EXPECT_EQ(t.scalar_type(), ref.scalar_type()) << name;
    EXPECT_TRUE(torch::equal(t, ref)) << name;
  }
  // The shared embedding, [V, d] = [122, 16] by config.json.
  bool shared = false;
  for (const auto& [name, t] : st.tensors)
    if (name == "model.shared.weight") shared = t.sizes() == torch::IntArrayRef{122, 16};
  EXPECT_TRUE(shared);
}

TEST(Safetensors, ReadsAFileAssembledByHand) {
  TempDir dir;
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"I64","shape":[2],"data_offsets":[16,32]},)"
      R"("a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
      R"("e":{"dtype":"F32","shape":[0,3],"data_offsets":[32,32]}})";
  std::string b(16, '\0');
  const int64_t bv[2] = {-5, 1LL << 40};
  std::memcpy(b.data(), bv, 16);
  io::write_file_atomic(dir / "x.safetensors", file_of(header, floats({1.5f, -2, 0.25f, 8}) + b));
  const auto st = model::read_safetensors(dir / "x.safetensors");
  ASSERT_EQ(st.tensors.size(), 3u);
  EXPECT_EQ(st.tensors[0].first, "a");  // in the order of their data
  EXPECT_TRUE(torch::equal(st.tensors[0].second, torch::tensor({{1.5f, -2.f}, {0.25f, 8.f}})));
  EXPECT_TRUE(torch::equal(st.tensors[1].second, torch::tensor({int64_t{-5}, int64_t{1} << 40})));
  EXPECT_EQ(st.tensors[2].second.sizes(), (torch::IntArrayRef{0, 3}));
  EXPECT_EQ(st.metadata.at("format"), "pt");
}

TEST(Safetensors, WriteThenReadKeepsNamesDtypesShapesValuesAndAlignment) {
  TempDir dir;
  model::SafetensorsFile f;
  f.metadata["format"] = "pt";
  f.tensors = {{"w", torch::randn({3, 5}).t()},  // not contiguous
               {"h", torch::randn({4}).to(torch::kBFloat16)},
               {"i", torch::arange(7, torch::kInt32)},
               {"s", torch::tensor(2.5, torch::kFloat64)},  // a scalar: shape []
               {"m", torch::tensor({true, false, true})}};
  model::write_safetensors(dir / "y.safetensors", f);
  const auto bytes = io::read_file(dir / "y.safetensors");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ(n % 8, 0u);
  const auto back = model::read_safetensors(dir / "y.safetensors");
  ASSERT_EQ(back.tensors.size(), f.tensors.size());
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    EXPECT_EQ(back.tensors[i].first, f.tensors[i].first);
    EXPECT_EQ(back.tensors[i].second.scalar_type(), f.tensors[i].second.scalar_type());
    EXPECT_TRUE(torch::equal(back.tensors[i].second, f.tensors[i].second)) << f.tensors[i].first;
  }
  EXPECT_EQ(back.metadata, f.metadata);
  f.tensors.push_back({"w", torch::zeros({1})});
  const auto msg = testing::error_of([&] { model::write_safetensors(dir / "z.safetensors", f); });
  EXPECT_NE(msg.find("\"w\" is reserved or given twice"), std::string::npos) << msg;
  EXPECT_FALSE(std::filesystem::exists(dir / "z.safetensors"));
}

TEST(Safetensors, DamagedFilesNameTheFileAndTheTensor) {
  TempDir dir;
  const auto file = dir / "bad.safetensors";
  auto error = [&](const std::string& bytes) {
    io::write_file_atomic(file, bytes);
    return testing::error_of([&] { model::read_safetensors(file); });
  };
  const auto ok_entry = [](const std::string& name, const std::string& dtype,
                           const std::string& shape, int b, int e) {
    return fmt::format(R"("{}":{{"dtype":"{}","shape":{},"data_offsets":[{},{}]}})", name, dtype,
                       shape, b, e);
  };
  const auto eight = floats({1, 2});
  struct Case {
    std::string bytes, expect;
  };
  const std::vector<Case> cases = {
      {"abc", "3 bytes, not a safetensors file"},
      {u64_le(1000) + "{}", "header length 1000 does not fit the file's 10 bytes"},
      {file_of("{\"a\":", ""), "the header is not JSON"},
      {file_of("[1]", ""), "the header is array, expected a JSON object"},
      {file_of("{" + ok_entry("a", "F8", "[2]", 0, 8) + "}", eight),
       "tensor \"a\": dtype \"F8\" is not one headcount reads"},
      {file_of("{" + ok_entry("a", "F32", "[2]", 0, 16) + "}", eight),
       "tensor \"a\": data_offsets [0, 16] lie outside the 8-byte data buffer"},
      {file_of("{" + ok_entry("a", "F32", "[3]", 0, 8) + "}", eight),
       "tensor \"a\": data_offsets [0, 8] hold 8 bytes, but dtype F32 and shape [3] need 12"},
      {file_of("{" + ok_entry("a", "F32", "[-2]", 0, 8) + "}", eight), "expected sizes from 0"},
      {file_of("{\"a\":{\"dtype\":\"F32\"}}", eight), "tensor \"a\": expected {\"dtype\""},
      {file_of(
           "{" + ok_entry("a", "F32", "[2]", 0, 8) + "," + ok_entry("b", "F32", "[1]", 4, 8) + "}",
           eight),
       "tensor \"b\" starts at byte 4 of the data buffer, expected 8 (overlapping"},
      {file_of("{" + ok_entry("a", "F32", "[1]", 4, 8) + "}", eight),
       "tensor \"a\" starts at byte 4 of the data buffer, expected 0 (a hole after"},
      {file_of("{" + ok_entry("a", "F32", "[1]", 0, 4) + "}", eight),
       "the tensors end at byte 4 of a 8-byte data buffer"},
      {file_of("{\"__metadata__\":{\"format\":1}}", ""), "__metadata__ \"format\" is 1"},
  };
  for (const auto& c : cases) {
    const auto msg = error(c.bytes);
    EXPECT_NE(msg.find(file.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.expect), std::string::npos) << "expected '" << c.expect << "' in: " << msg;
  }
  EXPECT_NE(testing::error_of([&] {
              model::read_safetensors(dir / "missing.safetensors");
            }).find("missing.safetensors"),
            std::string::npos);
}

}  // namespace
}  // namespace headcount
