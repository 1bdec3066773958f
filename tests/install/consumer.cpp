// Uses an installed ferry through its public headers and ferry::ferry. Calls host
// functions only, so it runs on machines without a GPU.
#include <ferry/allreduce.hpp>
#include <ferry/error.hpp>
#include <ferry/types.hpp>
#include <ferry/version.hpp>

#include <cstdio>
#include <cstring>

int main() {
  int failures = 0;
  auto expect = [&](bool ok, const char* what) {
    if (!ok) {
      std::fprintf(stderr, "consumer: FAILED: %s\n", what);
      ++failures;
    }
  };

  expect(ferry::dtype_size(ferry::DataType::kBFloat16) == 2, "dtype_size(bf16) == 2");
  expect(ferry::dtype_size(ferry::DataType::kFloat32) == 4, "dtype_size(f32) == 4");
  expect(std::strcmp(ferry::dtype_name(ferry::DataType::kFloat32), "float32") == 0,
         "dtype_name(f32) == \"float32\"");
  expect(ferry::dtype_from_string("bf16") == ferry::DataType::kBFloat16, "dtype_from_string(\"bf16\")");
  expect(std::strcmp(ferry::reduce_op_name(ferry::ReduceOp::kSum), "sum") == 0, "reduce_op_name(sum)");
  expect(ferry::algorithm_name(ferry::AllReduceAlgorithm::kOneShot) != nullptr, "algorithm_name(one-shot)");

  bool threw = false;
  try {
    (void)ferry::dtype_size(static_cast<ferry::DataType>(99));
  } catch (const ferry::InvalidArgument&) {
    threw = true;
  }
  expect(threw, "dtype_size(99) throws ferry::InvalidArgument");

  // The installed library loads the UCX it was built with (its RUNPATH), not an
  // older one elsewhere on the system (issue 24: a Debian libucp 1.13 was loaded).
  const ferry::UcxVersions ucx = ferry::ucx_versions();
  if (ucx.built_with_ucx) {
    std::printf("consumer: UCX built %d.%d, loaded %d.%d.%d from %s\n", ucx.built_major, ucx.built_minor,
                ucx.loaded_major, ucx.loaded_minor, ucx.loaded_release, ucx.loaded_library.c_str());
    expect(!ucx.loaded_older(), "the loaded UCX is at least the one ferry was built with");
    bool refused = false;
    try {
      ferry::check_ucx_version();
    } catch (const ferry::NotSupported& e) {
      refused = true;
      std::fprintf(stderr, "consumer: %s\n", e.what());
    }
    expect(!refused, "check_ucx_version() accepts the loaded UCX");
  }

  if (failures == 0) std::printf("consumer: installed ferry works (%s)\n", ferry::dtype_name(ferry::DataType::kBFloat16));
  return failures == 0 ? 0 : 1;
}
