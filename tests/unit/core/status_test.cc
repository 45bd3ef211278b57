#include "braid/status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <memory>
#include <string>

namespace braid {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.isOk());
  EXPECT_TRUE(static_cast<bool>(s));
  EXPECT_EQ(s.code(), Code::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.toString(), "ok");
  EXPECT_TRUE(Status::ok().isOk());
}

TEST(StatusTest, CodesMatchNcclResult) {
  // ncclSuccess .. ncclInProgress are 0..7; the C API converts by a cast.
  EXPECT_EQ(static_cast<int>(Code::kOk), 0);
  EXPECT_EQ(static_cast<int>(Code::kUnhandledCuda), 1);
  EXPECT_EQ(static_cast<int>(Code::kSystem), 2);
  EXPECT_EQ(static_cast<int>(Code::kInternal), 3);
  EXPECT_EQ(static_cast<int>(Code::kInvalidArgument), 4);
  EXPECT_EQ(static_cast<int>(Code::kInvalidUsage), 5);
  EXPECT_EQ(static_cast<int>(Code::kRemote), 6);
  EXPECT_EQ(static_cast<int>(Code::kInProgress), 7);
  EXPECT_EQ(static_cast<int>(Code::kTimeout), 8);
}

TEST(StatusTest, CodeNames) {
  EXPECT_STREQ(codeName(Code::kOk), "ok");
  EXPECT_STREQ(codeName(Code::kSystem), "system error");
  EXPECT_STREQ(codeName(Code::kInvalidUsage), "invalid usage");
  EXPECT_STREQ(codeName(Code::kTimeout), "timeout");
  EXPECT_STREQ(codeName(static_cast<Code>(99)), "unknown error");
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = invalidArgument("count must be >= 0");
  EXPECT_FALSE(s.isOk());
  EXPECT_FALSE(static_cast<bool>(s));
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "count must be >= 0");
  EXPECT_EQ(s.toString(), "invalid argument: count must be >= 0");
}

TEST(StatusTest, FactoriesSetCodes) {
  EXPECT_EQ(systemError("x").code(), Code::kSystem);
  EXPECT_EQ(internalError("x").code(), Code::kInternal);
  EXPECT_EQ(invalidUsage("x").code(), Code::kInvalidUsage);
  EXPECT_EQ(remoteError("x").code(), Code::kRemote);
  EXPECT_EQ(timeoutError("x").code(), Code::kTimeout);
}

TEST(StatusTest, OkCodeWithMessageIsOk) {
  Status s(Code::kOk, "ignored");
  EXPECT_TRUE(s.isOk());
  EXPECT_EQ(s.message(), "");
}

TEST(StatusTest, WithContextPrefixes) {
  Status s = remoteError("peer closed").withContext("rank 3 recv from 4");
  EXPECT_EQ(s.code(), Code::kRemote);
  EXPECT_EQ(s.message(), "rank 3 recv from 4: peer closed");
  EXPECT_TRUE(Status::ok().withContext("ignored").isOk());
}

TEST(StatusTest, CopiesShareNothingObservable) {
  Status a = timeoutError("waited 5 s");
  Status b = a;
  Status c = a.withContext("ctx");
  EXPECT_EQ(a.message(), "waited 5 s");
  EXPECT_EQ(b.message(), "waited 5 s");
  EXPECT_EQ(c.message(), "ctx: waited 5 s");
}

TEST(StatusTest, ErrnoErrorAppendsStrerror) {
  Status s = errnoError("open /dev/shm/x", ENOENT);
  EXPECT_EQ(s.code(), Code::kSystem);
  EXPECT_NE(s.message().find("open /dev/shm/x: "), std::string::npos);
  EXPECT_NE(s.message().find("No such file"), std::string::npos);
}

TEST(ResultTest, HoldsValue) {
  Result<int> r = 42;
  ASSERT_TRUE(r.isOk());
  EXPECT_TRUE(static_cast<bool>(r));
  EXPECT_EQ(r.value(), 42);
  EXPECT_EQ(*r, 42);
  EXPECT_TRUE(r.status().isOk());
}

TEST(ResultTest, HoldsError) {
  Result<int> r = invalidUsage("not initialized");
  EXPECT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), Code::kInvalidUsage);
  EXPECT_EQ(r.status().message(), "not initialized");
}

TEST(ResultTest, MoveOnlyValue) {
  Result<std::unique_ptr<std::string>> r = std::make_unique<std::string>("abc");
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(*r->get(), "abc");
  std::unique_ptr<std::string> owned = std::move(r).value();
  EXPECT_EQ(*owned, "abc");
}

Status failsWhen(bool fail) { return fail ? internalError("boom") : Status::ok(); }

Status chain(bool fail, int* reached) {
  BRAID_RETURN_IF_ERROR(failsWhen(fail));
  *reached = 1;
  return Status::ok();
}

Result<int> half(int x) {
  if (x % 2 != 0) return invalidArgument("odd");
  return x / 2;
}

Result<int> quarter(int x) {
  BRAID_ASSIGN_OR_RETURN(int h, half(x));
  BRAID_ASSIGN_OR_RETURN(int q, half(h));
  return q;
}

TEST(StatusMacrosTest, ReturnIfError) {
  int reached = 0;
  EXPECT_TRUE(chain(false, &reached).isOk());
  EXPECT_EQ(reached, 1);
  reached = 0;
  Status s = chain(true, &reached);
  EXPECT_EQ(s.code(), Code::kInternal);
  EXPECT_EQ(reached, 0);
}

TEST(StatusMacrosTest, AssignOrReturn) {
  Result<int> ok = quarter(12);
  ASSERT_TRUE(ok.isOk());
  EXPECT_EQ(ok.value(), 3);
  Result<int> bad = quarter(6);  // 6 -> 3 -> odd
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace braid
