// libheadcount_spm.so: SentencePiece behind the C interface of backend.h (why: see there).
#define HEADCOUNT_SPM_BUILDING 1
#include "spm/backend.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

struct hc_spm_processor {
  sentencepiece::SentencePieceProcessor sp;
};

namespace {

char* copy_out(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out != nullptr) {
    std::memcpy(out, s.data(), s.size());
    out[s.size()] = '\0';
  }
  return out;
}

int fail(char** error, const std::string& message) {
  if (error != nullptr) *error = copy_out(message);
  return 1;
}

// No C++ exception may cross the C boundary.
template <typename F>
int guarded(char** error, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return fail(error, e.what());
  } catch (...) {
    return fail(error, "unknown error inside SentencePiece");
  }
}

}  // namespace

extern "C" {

hc_spm_processor* hc_spm_load(const char* path, char** error) {
  hc_spm_processor* p = nullptr;
  guarded(error, [&] {
    auto loaded = new hc_spm_processor();
    const auto status = loaded->sp.Load(path);
    if (!status.ok()) {
      delete loaded;
      return fail(error, status.ToString());
    }
    p = loaded;
    return 0;
  });
  return p;
}

void hc_spm_free(hc_spm_processor* p) {
  delete p;
}

void hc_spm_free_buffer(void* buffer) {
  std::free(buffer);
}

int hc_spm_encode(const hc_spm_processor* p, const char* text, size_t len, int** ids, size_t* n,
                  char** error) {
  return guarded(error, [&] {
    std::vector<int> out;
    const auto status = p->sp.Encode(std::string(text, len), &out);
    if (!status.ok()) return fail(error, status.ToString());
    *n = out.size();
    *ids = static_cast<int*>(std::malloc(std::max<size_t>(out.size(), 1) * sizeof(int)));
    if (*ids == nullptr) return fail(error, "out of memory");
    if (!out.empty()) std::memcpy(*ids, out.data(), out.size() * sizeof(int));
    return 0;
  });
}

int hc_spm_decode(const hc_spm_processor* p, const int* ids, size_t n, char** text, size_t* len,
                  char** error) {
  return guarded(error, [&] {
    std::string out;
    const auto status = p->sp.Decode(std::vector<int>(ids, ids + n), &out);
    if (!status.ok()) return fail(error, status.ToString());
    *len = out.size();
    *text = copy_out(out);
    return *text == nullptr ? fail(error, "out of memory") : 0;
  });
}

int hc_spm_piece_size(const hc_spm_processor* p) {
  return p->sp.GetPieceSize();
}

int hc_spm_encode_pieces(const hc_spm_processor* p, const char* text, size_t len, char** pieces,
                         size_t* bytes, size_t* n, char** error) {
  return guarded(error, [&] {
    std::vector<std::string> out;
    const auto status = p->sp.Encode(std::string(text, len), &out);
    if (!status.ok()) return fail(error, status.ToString());
    std::string joined;
    for (const auto& piece : out) {
      joined += piece;
      joined += '\0';
    }
    *pieces = static_cast<char*>(std::malloc(joined.size() + 1));
    if (*pieces == nullptr) return fail(error, "out of memory");
    std::memcpy(*pieces, joined.data(), joined.size());
    (*pieces)[joined.size()] = '\0';
    *bytes = joined.size();
    *n = out.size();
    return 0;
  });
}

int hc_spm_decode_pieces(const hc_spm_processor* p, const char* pieces, size_t bytes, size_t n,
                         char** text, size_t* len, char** error) {
  return guarded(error, [&] {
    std::vector<std::string> in;
    for (size_t at = 0; in.size() < n && at < bytes;) {
      in.emplace_back(pieces + at);
      at += in.back().size() + 1;
    }
    if (in.size() != n) return fail(error, "decode_pieces: fewer pieces than announced");
    std::string out;
    const auto status = p->sp.Decode(in, &out);
    if (!status.ok()) return fail(error, status.ToString());
    *text = copy_out(out);
    if (*text == nullptr) return fail(error, "out of memory");
    *len = out.size();
    return 0;
  });
}

char* hc_spm_id_to_piece(const hc_spm_processor* p, int id) {
  return copy_out(p->sp.IdToPiece(id));
}

void hc_spm_special_ids(const hc_spm_processor* p, int ids[4]) {
  ids[0] = p->sp.pad_id();
  ids[1] = p->sp.unk_id();
  ids[2] = p->sp.bos_id();
  ids[3] = p->sp.eos_id();
}

int hc_spm_train(const char* args, unsigned seed, char** model, size_t* len, char** error) {
  return guarded(error, [&] {
    sentencepiece::SetRandomGeneratorSeed(seed);
    std::string out;
    const auto status = sentencepiece::SentencePieceTrainer::Train(args, nullptr, &out);
    if (!status.ok()) return fail(error, status.ToString());
    *len = out.size();
    *model = copy_out(out);
    return *model == nullptr ? fail(error, "out of memory") : 0;
  });
}

}  // extern "C"
