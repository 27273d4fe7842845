// libFuzzer target: the config loader (a YAML file's text, then --set assignments).
// Input: YAML text, then up to four `key=value` assignments, separated by NUL bytes.
#include "fuzz_util.h"
#include "headcount/common/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headcount;
  const auto parts = fuzz::split_input(data, size, 5);
  fuzz::expect_clear_error_or_success([&] {
    ConfigLoader loader;
    loader.apply_yaml_text(parts[0], "fuzz.yaml");
    for (size_t i = 1; i < parts.size(); ++i) loader.apply_set(parts[i]);
    const Config c = loader.finish();
    // What a run folder stores must load back as the same config.
    const std::string text = dump_config(c);
    ConfigLoader again;
    again.apply_yaml_text(text, "dump");
    if (!changed_keys(c, again.finish()).empty()) std::abort();
  });
  return 0;
}
