// Edge cases of the SDK's ABI glue (zcode/sdk/plugin.h, stages.h): a
// failure with no host to report it to is a programming error that aborts
// (never a silent success), and CreateContext::stream() reads the ABI 1.4
// field only when the args' struct_size covers it.
#include <zcode/core/host_services.h>
#include <zcode/sdk/plugin.h>

#include <gtest/gtest.h>

#include <cstddef>

namespace {

using zcode::sdk::Error;
namespace detail = zcode::sdk::detail;

class Refuses : public zcode::sdk::Callback {
 public:
  explicit Refuses(const zcode::sdk::CreateContext&) { throw Error(ZC_ERR_INVALID_ARGUMENT, "refused on purpose"); }
  uint32_t on_event(const zc_event&) override { return 0; }
};

// Restores g_host, which the tests below clear or set.
class SdkPlugin : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = detail::g_host; }
  void TearDown() override { detail::g_host = saved_; }
  const zc_host_services* saved_ = nullptr;
};

TEST_F(SdkPlugin, MakeStatusWithAHostReturnsItsStatus) {
  zcode::HostServices hs;
  detail::g_host = hs.raw();
  zc_status* s = detail::make_status(ZC_ERR_IO, "disk full");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(zcode::status_code(s), static_cast<zc_status_code>(ZC_ERR_IO));
  EXPECT_STREQ(zcode::status_message(s), "disk full");
  zcode::status_release(s);
}

using SdkPluginDeathTest = SdkPlugin;

// NULL would be read as success: the SDK aborts with the lost message instead.
TEST_F(SdkPluginDeathTest, MakeStatusWithoutAHostAborts) {
  detail::g_host = nullptr;
  EXPECT_DEATH(detail::make_status(ZC_ERR_IO, "disk full"),
               "zcode sdk: a plugin call failed \\(status 3: disk full\\) before the host's services were set");
}

// The case it guards: create called with no args->host before negotiation.
TEST_F(SdkPluginDeathTest, CreateWithoutAHostAbortsInsteadOfSucceeding) {
  detail::g_host = nullptr;
  const zc_callback_table& t = detail::CallbackThunks<Refuses>::table;
  zc_create_args a{};
  a.struct_size = sizeof a;
  a.options_json = "{}";
  a.config_json = "{}";
  void* inst = nullptr;
  EXPECT_DEATH(t.create(&a, &inst), "refused on purpose\\) before the host's services were set");
}

TEST(SdkCreateContext, StreamIsReadOnlyWhenStructSizeCoversIt) {
  zcode::HostServices hs;
  zc_create_args a{};
  a.struct_size = sizeof a;
  a.host = hs.raw();
  a.options_json = "{}";
  a.config_json = "{}";
  EXPECT_EQ(zcode::sdk::CreateContext(&a).stream(), nullptr);  // what the CPU host passes
  int token = 0;
  a.stream = &token;
  EXPECT_EQ(zcode::sdk::CreateContext(&a).stream(), &token);
  // Args built for ABI 1.3 end before the field: whatever lies there is not read.
  a.struct_size = offsetof(zc_create_args, stream);
  EXPECT_EQ(zcode::sdk::CreateContext(&a).stream(), nullptr);
}

}  // namespace
