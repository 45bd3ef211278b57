// The intra-host segment's creation protocol: local rank 0 creates and sizes the named region,
// the others open it. A peer that opens the name between creation and sizing must wait for the
// size instead of mapping an empty file (reading its header would SIGBUS the process).
#include "collectives/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "transport/bootstrap/bootstrap.h"

namespace braid::detail {
namespace {

class ShmSegmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/braid-seg-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto store = createFileStore(dir_);
    ASSERT_TRUE(store.isOk()) << store.status().toString();
    store_ = std::move(store).value();
    name_ = "/braid-segtest-" + std::to_string(getpid());
  }
  void TearDown() override {
    shm_unlink(name_.c_str());
    std::string cmd = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(system(cmd.c_str()), 0);
  }
  Result<std::unique_ptr<ShmSegment>> open(int localIndex, int64_t timeoutMs) {
    return ShmSegment::create(name_, store_.get(), "seg/", 42, {0, 1}, localIndex, 1 << 16,
                              timeoutMs);
  }

  std::string dir_;
  std::string name_;
  std::unique_ptr<Store> store_;
};

TEST_F(ShmSegmentTest, PeerWaitsWhileTheNameExistsWithoutSize) {
  // What rank 0 looks like between shm_open(O_CREAT) and sizing the file.
  int fd = shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  close(fd);
  auto seg = open(1, 300);
  ASSERT_FALSE(seg.isOk());
  EXPECT_EQ(seg.status().code(), Code::kTimeout) << seg.status().toString();
  EXPECT_NE(seg.status().message().find("did not appear at full size"), std::string::npos)
      << seg.status().toString();
}

TEST_F(ShmSegmentTest, PeerRejectsASegmentOfAnotherSize) {
  int fd = shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  close(fd);
  auto seg = open(1, 2000);
  ASSERT_FALSE(seg.isOk());
  EXPECT_EQ(seg.status().code(), Code::kInvalidUsage) << seg.status().toString();
  EXPECT_NE(seg.status().message().find("BRAID_SHM_SEGMENT_BYTES"), std::string::npos);
}

TEST_F(ShmSegmentTest, TwoRanksMapOneSegmentAndTheNameIsRemoved) {
  // Rank 1 starts first and must wait for rank 0's segment.
  auto peer = std::async(std::launch::async, [&] { return open(1, 5000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto first = open(0, 5000);
  auto second = peer.get();
  ASSERT_TRUE(first.isOk()) << first.status().toString();
  ASSERT_TRUE(second.isOk()) << second.status().toString();
  // Both see the same memory.
  (*first)->half(1, 0)[100] = 0x5a;
  EXPECT_EQ((*second)->half(1, 0)[100], 0x5a);
  // Once both mapped it, the name is gone from /dev/shm.
  int fd = shm_open(name_.c_str(), O_RDWR, 0600);
  EXPECT_LT(fd, 0) << "the segment's name outlived its mapping by every rank";
  if (fd >= 0) close(fd);
}

}  // namespace
}  // namespace braid::detail
