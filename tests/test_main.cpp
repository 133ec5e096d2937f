#include <gtest/gtest.h>
#include <torch/torch.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  torch::set_num_threads(1);  // ctest runs test cases in parallel processes
  return RUN_ALL_TESTS();
}
