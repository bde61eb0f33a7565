#include "data/augment.h"

#include <cmath>
#include <set>
#include <vector>

#include "data/batcher.h"
#include "gtest/gtest.h"
#include "testing/data_test_util.h"

namespace pstrain {
namespace {

TEST(StandardizeImageTest, ZeroMeanUnitVariance) {
  std::vector<float> image(3 * 4 * 3);
  for (size_t i = 0; i < image.size(); ++i) image[i] = static_cast<float>((i * 37) % 256) / 255;
  StandardizeImage(image.data(), static_cast<int64_t>(image.size()));
  double sum = 0, squares = 0;
  for (float v : image) sum += v, squares += v * v;
  EXPECT_NEAR(sum / image.size(), 0.0, 1e-5);
  EXPECT_NEAR(squares / image.size(), 1.0, 1e-4);
}

TEST(StandardizeImageTest, ConstantImageUsesTheFloor) {
  // TensorFlow divides by max(stddev, 1/sqrt(n)) (0..255 scale): a constant
  // image becomes zeros, not NaNs.
  std::vector<float> image(16, 0.5f);
  StandardizeImage(image.data(), 16);
  for (float v : image) EXPECT_EQ(v, 0.0f);
  // One pixel off by 1/255 in 16: stddev (0..255 scale) 0.2421 < 1/4, so
  // the floor 1/4 divides: (1 - 1/16) * 4 = 3.75.
  image.assign(16, 0.0f);
  image[0] = 1.0f / 255;
  StandardizeImage(image.data(), 16);
  EXPECT_NEAR(image[0], 3.75f, 1e-4);
}

TEST(AugmentImageTest, CropsShiftWithZerosAndFlipsMirror) {
  const int h = 6, w = 5, c = 2;
  std::vector<float> original(h * w * c);
  for (size_t i = 0; i < original.size(); ++i) original[i] = 1.0f + i;
  std::vector<float> scratch(original.size());
  Augmentation a;
  a.pad = 2;
  a.flip = true;
  std::set<std::tuple<int, int, bool>> seen;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    std::vector<float> image = original;
    AugmentImage(a, /*training=*/true, h, w, c, seed, image.data(), scratch.data());
    std::vector<float> again = original;
    AugmentImage(a, true, h, w, c, seed, again.data(), scratch.data());
    ASSERT_EQ(image, again) << "not a function of the seed";
    // Find the shift and flip that explain the result.
    bool found = false;
    for (int dy = -2; dy <= 2 && !found; ++dy) {
      for (int dx = -2; dx <= 2 && !found; ++dx) {
        for (bool flip : {false, true}) {
          bool match = true;
          for (int y = 0; y < h && match; ++y) {
            for (int x = 0; x < w && match; ++x) {
              const int sy = y + dy, sx = (flip ? w - 1 - x : x) + dx;
              for (int k = 0; k < c; ++k) {
                const float want =
                    sy < 0 || sy >= h || sx < 0 || sx >= w ? 0.0f : original[(sy * w + sx) * c + k];
                match = match && image[(y * w + x) * c + k] == want;
              }
            }
          }
          if (match) {
            seen.insert({dy, dx, flip});
            found = true;
            break;
          }
        }
      }
    }
    ASSERT_TRUE(found) << "seed " << seed << " is no crop of the padded image";
  }
  EXPECT_EQ(seen.size(), 5u * 5u * 2u) << "every offset and both flips occur";
  // Evaluation leaves the pixels alone.
  std::vector<float> image = original;
  AugmentImage(a, /*training=*/false, h, w, c, 7, image.data(), scratch.data());
  EXPECT_EQ(image, original);
}

TEST(BatchIteratorPrefetchTest, SameBatchesAsWithout) {
  Dataset d = testutil::MakeDataset(37, 4, 4, 3);
  Augmentation a;
  a.pad = 1;
  a.flip = true;
  a.standardize = true;
  auto plain = *BatchIterator::Create(&d, 5, 0, 1, true, 3);
  auto ahead = *BatchIterator::Create(&d, 5, 0, 1, true, 3);
  plain->SetAugmentation(a);
  ahead->SetAugmentation(a);
  plain->Skip(2);
  ahead->Skip(2);
  ahead->StartPrefetch();
  std::vector<float> x1(5 * 48), x2(5 * 48);
  std::vector<float> y1(5), y2(5);
  for (int step = 0; step < 30; ++step) {
    plain->Next(x1.data(), y1.data());
    ahead->Next(x2.data(), y2.data());
    ASSERT_EQ(x1, x2) << step;
    ASSERT_EQ(y1, y2) << step;
    ASSERT_EQ(plain->epoch(), ahead->epoch()) << step;
  }
  EXPECT_GE(ahead->epoch(), 3);
}

}  // namespace
}  // namespace pstrain
