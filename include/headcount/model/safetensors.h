// The safetensors format (Hugging Face's weight files), read and written without a dependency:
// an unsigned 64-bit little-endian header length N, N bytes of JSON
//   {"NAME": {"dtype": "F32", "shape": [..], "data_offsets": [BEGIN, END]}, ...,
//    "__metadata__": {"KEY": "VALUE", ...}}
// then the byte buffer the offsets index (relative to its start, little-endian, row-major).
// Readers check what the format promises: every tensor's byte range inside the buffer and of the
// size its dtype and shape give, no two overlapping, no hole; an error names the file and the
// tensor.
#pragma once

#include <torch/types.h>

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace headcount::model {

namespace fs = std::filesystem;

struct SafetensorsFile {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;  // in the order of their data
  std::map<std::string, std::string> metadata;                 // "__metadata__"
};

// Tensors come back on the CPU in their stored dtype (F64, F32, F16, BF16, I64, I32, I16, I8, U8,
// BOOL).
SafetensorsFile read_safetensors(const fs::path& file);
// Writes atomically (a temporary name, then renamed); tensors are made contiguous on the CPU, in
// the order given. Names must be unique and not "__metadata__".
void write_safetensors(const fs::path& file, const SafetensorsFile& content);

}  // namespace headcount::model
