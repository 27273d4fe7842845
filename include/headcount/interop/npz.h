// NumPy's .npz archives (a zip of .npy files, as numpy.savez and Marian's cnpy write them) read
// into LibTorch tensors, for Marian's native checkpoints (model.npz).
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <string>

namespace headcount::interop {

// One .npy array (format versions 1-3): little-endian or byte-sized dtypes of kind f (2, 4, 8
// bytes), i (1, 2, 4, 8), u1 and b1, C or Fortran order, any shape (0-d included). The tensor is a
// C-contiguous copy on the CPU in the matching LibTorch dtype (u1: kByte, b1: kBool). `what` names
// the array in errors (the archive and member).
torch::Tensor parse_npy(const std::string& bytes, const std::string& what);

// Every member NAME.npy of the archive as NAME -> tensor, in the archive's order of names (the
// map's). Members may be stored or deflated. Errors name the file and the member.
std::map<std::string, torch::Tensor> read_npz(const std::filesystem::path& file);

}  // namespace headcount::interop
