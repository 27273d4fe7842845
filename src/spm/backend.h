// The only door to SentencePiece: a C interface to libheadcount_spm.so.
//
// SentencePiece needs protobuf and so does LibTorch, each its own version (Debian's LibTorch the
// system's libprotobuf, the official LibTorch a copy inside libtorch_cpu). A program whose
// SentencePiece binds its protobuf calls to another version's symbols crashes (before main, or in
// the vocabulary trainer). libheadcount_spm.so links SentencePiece and its bundled protobuf-lite
// statically with every symbol but these functions local (-fvisibility=hidden,
// --exclude-libs,ALL), so they resolve inside the library whatever protobuf the process holds.
// Plain C types only cross the boundary: the library may be built with another C++ ABI setting
// than the LibTorch consumer (_GLIBCXX_USE_CXX11_ABI).
//
// Every buffer the library returns is malloc'ed by it and released with hc_spm_free_buffer. A
// function that fails returns non-zero (or null) and sets *error to a message (free it too).
#pragma once

#include <stddef.h>

#if defined(HEADCOUNT_SPM_BUILDING)
#define HC_SPM_API __attribute__((visibility("default")))
#else
#define HC_SPM_API
#endif

extern "C" {

typedef struct hc_spm_processor hc_spm_processor;

// A loaded model, or null with *error set.
HC_SPM_API hc_spm_processor* hc_spm_load(const char* path, char** error);
HC_SPM_API void hc_spm_free(hc_spm_processor* p);
HC_SPM_API void hc_spm_free_buffer(void* buffer);

// text[0..len) -> *ids[0..*n).
HC_SPM_API int hc_spm_encode(const hc_spm_processor* p, const char* text, size_t len, int** ids,
                             size_t* n, char** error);
// ids[0..n) -> *text[0..*len) (not NUL-terminated).
HC_SPM_API int hc_spm_decode(const hc_spm_processor* p, const int* ids, size_t n, char** text,
                             size_t* len, char** error);
// text[0..len) -> its pieces as strings (an unknown character's piece is its surface text), each
// NUL-terminated, one after the other in *pieces[0..*len); *n pieces.
HC_SPM_API int hc_spm_encode_pieces(const hc_spm_processor* p, const char* text, size_t len,
                                    char** pieces, size_t* bytes, size_t* n, char** error);
// The inverse: n NUL-terminated pieces one after the other in pieces[0..bytes) -> *text[0..*len)
// (a piece the model does not know is taken as its surface text).
HC_SPM_API int hc_spm_decode_pieces(const hc_spm_processor* p, const char* pieces, size_t bytes,
                                    size_t n, char** text, size_t* len, char** error);
HC_SPM_API int hc_spm_piece_size(const hc_spm_processor* p);
// The piece of `id` as a NUL-terminated string.
HC_SPM_API char* hc_spm_id_to_piece(const hc_spm_processor* p, int id);
// pad, unk, bos, eos.
HC_SPM_API void hc_spm_special_ids(const hc_spm_processor* p, int ids[4]);

// Trains a model from SentencePiece's command-line style arguments with the given random seed;
// the serialized model in *model[0..*len).
HC_SPM_API int hc_spm_train(const char* args, unsigned seed, char** model, size_t* len,
                            char** error);

}  // extern "C"
