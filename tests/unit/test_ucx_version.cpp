// ferry/version.hpp on the CPU: the UCX the tests load is the one ferry was
// built with (the build tree's RUNPATH), and an older one is refused in words.
#include <gtest/gtest.h>

#include <string>

#include "ferry/version.hpp"

namespace {

TEST(UcxVersion, LoadedIsTheBuildsOrNewer) {
  const ferry::UcxVersions v = ferry::ucx_versions();
  if (!v.built_with_ucx) GTEST_SKIP() << "built without UCX";
  EXPECT_GT(v.built_major + v.built_minor, 0);
  EXPECT_FALSE(v.loaded_older()) << "built " << v.built_major << "." << v.built_minor << ", loaded "
                                 << v.loaded_major << "." << v.loaded_minor << " from " << v.loaded_library;
  EXPECT_NE(v.loaded_library.find("libucp"), std::string::npos) << v.loaded_library;
  EXPECT_NO_THROW(ferry::check_ucx_version());
}

TEST(UcxVersion, OlderIsDetected) {
  ferry::UcxVersions v;
  v.built_with_ucx = true;
  v.built_major = 1, v.built_minor = 22;
  v.loaded_major = 1, v.loaded_minor = 13;
  EXPECT_TRUE(v.loaded_older());
  v.loaded_minor = 22;
  EXPECT_FALSE(v.loaded_older());
  v.loaded_major = 2, v.loaded_minor = 0;
  EXPECT_FALSE(v.loaded_older());
  v.built_with_ucx = false;
  v.loaded_major = 0;
  EXPECT_FALSE(v.loaded_older());
}

}  // namespace
