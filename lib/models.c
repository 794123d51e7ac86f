/* models.c -- the five reference models of theory.md section 6, with the
 * shapes of the FLP code (PyTorch layer order, so parameter counts match:
 * 50,890 / 242,762 / 1,199,882 / 29,034 / 20,040,522). */
#include <string.h>

#include "gc_errno.h"
#include "gc_nn.h"

static const char *const names[] = { "mnist-mlp", "fmnist-mlp", "mnist-cnn",
                                     "fmnist-cnn", "cifar-vgg19", NULL };

const char *const *gc_nn_model_names(void) { return names; }

const char *gc_nn_model_dataset(const char *name)
{
  if (!strcmp(name, "mnist-mlp") || !strcmp(name, "mnist-cnn"))
    return "mnist";
  if (!strcmp(name, "fmnist-mlp") || !strcmp(name, "fmnist-cnn"))
    return "fmnist";
  if (!strcmp(name, "cifar-vgg19"))
    return "cifar10";
  return NULL;
}

const char *gc_nn_model_default(const char *dataset)
{
  return !strcmp(dataset, "cifar10") ? "cifar-vgg19"
         : !strcmp(dataset, "fmnist") ? "fmnist-mlp" : "mnist-mlp";
}

#define LIN(o) { .kind = GC_NN_LINEAR, .out_c = (o) }
#define CONV(o, k, p) { .kind = GC_NN_CONV, .out_c = (o), .ksize = (k), .pad = (p) }
#define RELU { .kind = GC_NN_RELU }
#define POOL { .kind = GC_NN_MAXPOOL }
#define BN { .kind = GC_NN_BATCHNORM }
#define DROP(q) { .kind = GC_NN_DROPOUT, .p = (q) }
#define LSM { .kind = GC_NN_LOGSOFTMAX }

static gc_nn *mnist_shaped(gc_nn_layer *s, size_t L, size_t B)
{
  s[0].in_c = 1; s[0].in_h = 28; s[0].in_w = 28;
  return gc_nn_alloc(s, L, GC_LOSS_NLL, B);
}

/* kuangliu/pytorch-cifar VGG('VGG19'): [conv3x3 pad 1, BN, ReLU] blocks with
 * max-pools, then Linear(512, 10) on logits (cross-entropy). */
static gc_nn *vgg19(size_t B)
{
  static const int cfg[] = { 64, 64, -1, 128, 128, -1, 256, 256, 256, 256, -1,
                             512, 512, 512, 512, -1, 512, 512, 512, 512, -1 };
  gc_nn_layer s[64];
  size_t L = 0;
  memset(s, 0, sizeof s);
  for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
    if (cfg[i] < 0) {
      s[L++].kind = GC_NN_MAXPOOL;
      continue;
    }
    s[L].kind = GC_NN_CONV; s[L].out_c = (size_t) cfg[i]; s[L].ksize = 3; s[L].pad = 1;
    L++;
    s[L++].kind = GC_NN_BATCHNORM;
    s[L++].kind = GC_NN_RELU;
  }
  s[L].kind = GC_NN_LINEAR; s[L].out_c = 10;   /* AvgPool(1) is the identity */
  L++;
  s[0].in_c = 3; s[0].in_h = 32; s[0].in_w = 32;
  return gc_nn_alloc(s, L, GC_LOSS_CE, B);
}

gc_nn *gc_nn_alloc_model(const char *name, size_t B)
{
  if (!strcmp(name, "mnist-mlp")) {
    gc_nn_layer s[] = { LIN(64), RELU, LIN(10), LSM };
    return mnist_shaped(s, sizeof s / sizeof s[0], B);
  }
  if (!strcmp(name, "fmnist-mlp")) {
    gc_nn_layer s[] = { LIN(256), RELU, LIN(128), RELU, LIN(64), RELU, LIN(10), LSM };
    return mnist_shaped(s, sizeof s / sizeof s[0], B);
  }
  if (!strcmp(name, "mnist-cnn")) {
    gc_nn_layer s[] = { CONV(32, 3, 0), RELU, CONV(64, 3, 0), RELU, POOL,
                        DROP(0.25), LIN(128), RELU, DROP(0.25), LIN(10), LSM };
    return mnist_shaped(s, sizeof s / sizeof s[0], B);
  }
  if (!strcmp(name, "fmnist-cnn")) {
    gc_nn_layer s[] = { CONV(16, 5, 2), BN, RELU, POOL, CONV(32, 5, 2), BN, RELU,
                        POOL, LIN(10), LSM };
    return mnist_shaped(s, sizeof s / sizeof s[0], B);
  }
  if (!strcmp(name, "cifar-vgg19"))
    return vgg19(B);
  GC_ERROR_NULL("unknown model (mnist-mlp, fmnist-mlp, mnist-cnn, fmnist-cnn,"
                " cifar-vgg19)", GC_EINVAL);
}
