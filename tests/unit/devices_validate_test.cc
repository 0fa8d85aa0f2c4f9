// The kubelet's checks of device plugins, in its words (devices/validate.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "devices/validate.h"

namespace outpost::devices {
namespace {

TEST(DevicesValidate, ExtendedResourceNamesAsTheKubeletDecides) {
  for (const char* good : {"vendor.example/camera", "nvidia.com/gpu", "a/b", "example.com/Foo.Bar_1-x",
                           "1.2.3/x", "k8s.io/thing"}) {
    EXPECT_TRUE(IsExtendedResourceName(good)) << good;
    EXPECT_EQ(ResourceNameProblem(good), "") << good;
  }
  std::string long_domain = std::string(244, 'a');
  EXPECT_TRUE(IsExtendedResourceName(long_domain + "/x"));  // "requests." + 244 = 253
  EXPECT_FALSE(IsExtendedResourceName(long_domain + "a/x"));
  EXPECT_TRUE(IsExtendedResourceName("v.example/" + std::string(63, 'n')));
  EXPECT_FALSE(IsExtendedResourceName("v.example/" + std::string(64, 'n')));
  for (const char* bad : {"camera", "", "/camera", "vendor.example/", "Vendor.example/camera", "vendor..example/x",
                          "-vendor.example/x", "vendor.example-/x", "vendor.example/a/b", "kubernetes.io/gpu",
                          "foo.kubernetes.io/gpu", "requests.example/x", "vendor.example/-x", "vendor.example/x_",
                          "vendor.example/a b", "vendor_x.example/a"}) {
    EXPECT_FALSE(IsExtendedResourceName(bad)) << bad;
    EXPECT_NE(ResourceNameProblem(bad), "") << bad;
  }
}

TEST(DevicesValidate, RegisterInTheKubeletsOrderAndWords) {
  const std::string dir = "/var/lib/kubelet/device-plugins/";
  auto ok = ValidateRegister(dir, "v1beta1", "vendor.example/camera", "camera.sock");
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  EXPECT_EQ(*ok, "/var/lib/kubelet/device-plugins/camera.sock");

  auto version = ValidateRegister(dir, "v1alpha", "camera", "camera.sock");  // the version is checked first
  ASSERT_FALSE(version.ok());
  EXPECT_EQ(version.error().code(), Code::kUnknown);
  EXPECT_EQ(version.error().message(),
            "requested API version \"v1alpha\" is not supported by kubelet. Supported version is [\"v1beta1\"]");
  auto name = ValidateRegister(dir, "v1beta1", "camera", "camera.sock");
  ASSERT_FALSE(name.ok());
  EXPECT_EQ(name.error().message(), "the ResourceName \"camera\" is invalid");
  auto quoted = ValidateRegister(dir, "v1beta1", "a\"b\n", "x.sock");
  ASSERT_FALSE(quoted.ok());
  EXPECT_EQ(quoted.error().message(), "the ResourceName \"a\\\"b\\n\" is invalid");
}

TEST(DevicesValidate, EndpointIsJoinedToTheDirAsGoDoes) {
  const std::string dir = "/var/lib/kubelet/device-plugins";
  struct Case {
    const char* endpoint;
    const char* path;  // "" = refused
  };
  for (const Case& c : std::vector<Case>{
           {"camera.sock", "/var/lib/kubelet/device-plugins/camera.sock"},
           {"sub/camera.sock", "/var/lib/kubelet/device-plugins/sub/camera.sock"},
           {"./camera.sock", "/var/lib/kubelet/device-plugins/camera.sock"},
           // An absolute endpoint is appended, not honoured (filepath.Join).
           {"/x.sock", "/var/lib/kubelet/device-plugins/x.sock"},
           {"sub/../camera.sock", "/var/lib/kubelet/device-plugins/camera.sock"},
           {"", ""},
           {".", ""},
           {"../x.sock", ""},
           {"../device-plugins-evil/x.sock", ""},
           {"a/../../../../etc/x", ""},
       }) {
    auto r = ValidateRegister(dir, "v1beta1", "vendor.example/camera", c.endpoint);
    if (*c.path) {
      ASSERT_TRUE(r.ok()) << c.endpoint << ": " << r.error().message();
      EXPECT_EQ(*r, c.path) << c.endpoint;
    } else {
      ASSERT_FALSE(r.ok()) << c.endpoint << " gave " << *r;
      EXPECT_EQ(r.error().message(),
                "endpoint \"" + std::string(c.endpoint) + "\" is not a socket name in /var/lib/kubelet/device-plugins");
    }
  }
  auto long_path = ValidateRegister(dir, "v1beta1", "vendor.example/camera", std::string(80, 's') + ".sock");
  ASSERT_FALSE(long_path.ok());
  EXPECT_NE(long_path.error().message().find("more than the 107 a unix socket takes"), std::string::npos)
      << long_path.error().message();
}

TEST(DevicesValidate, PluginsRegistryValidationInTheKubeletsWords) {
  EXPECT_TRUE(ValidatePlugin("vendor.example/camera", {"v1alpha", "v1beta1"}).ok());
  Status version = ValidatePlugin("vendor.example/camera", {"v1", "v2"});
  ASSERT_FALSE(version.ok());
  EXPECT_EQ(version.error().message(), "manager version, v1beta1, is not among plugin supported versions [v1 v2]");
  Status none = ValidatePlugin("vendor.example/camera", {});
  EXPECT_EQ(none.error().message(), "manager version, v1beta1, is not among plugin supported versions []");
  Status name = ValidatePlugin("camera", {"v1beta1"});
  ASSERT_FALSE(name.ok());
  EXPECT_EQ(name.error().message(), "invalid name of device plugin socket: the ResourceName \"camera\" is invalid");
}

TEST(DevicesValidate, CdiNames) {
  for (const char* good : {"vendor.com/class=name", "nvidia.com/gpu=0", "a/b=c", "v.com/c-1_x=dev:1.2",
                           "vendor.com/class=all"}) {
    EXPECT_TRUE(IsQualifiedCdiName(good)) << good;
  }
  for (const char* bad : {"", "vendor.com/class", "vendor.com=name", "/vendor/class=x", "1vendor.com/class=x",
                          "vendor.com/1class=x", "vendor.com/cla/ss=x", "vendor.com/class=", "vendor.com/class=-x",
                          "vendor.com/class=x:", "vendor.com/class=a b", "vendor.com-/class=x"}) {
    EXPECT_FALSE(IsQualifiedCdiName(bad)) << bad;
  }
}

TEST(DevicesValidate, GoQuote) {
  EXPECT_EQ(GoQuote("plain"), "\"plain\"");
  EXPECT_EQ(GoQuote("a\"b\\c\n\t\x01\x7f"), "\"a\\\"b\\\\c\\n\\t\\x01\\x7f\"");
  EXPECT_EQ(GoQuote("caf\xc3\xa9"), "\"caf\xc3\xa9\"");
  EXPECT_EQ(GoQuote("\xff"), "\"\\xff\"");
}

}  // namespace
}  // namespace outpost::devices
