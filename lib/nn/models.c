/* models.c -- the five reference models of theory.md section 6, with the
 * shapes of the FLP code (PyTorch layer order, so parameter counts match:
 * 50,890 / 242,762 / 1,199,882 / 29,034 / 20,040,522). */
#include <stdio.h>
#include <string.h>

#include "gc_errno.h"
#include "gc_nn.h"

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

static gc_nn *mnist_mlp(size_t B)
{
  gc_nn_layer s[] = { LIN(64), RELU, LIN(10), LSM };
  return mnist_shaped(s, sizeof s / sizeof s[0], B);
}

static gc_nn *fmnist_mlp(size_t B)
{
  gc_nn_layer s[] = { LIN(256), RELU, LIN(128), RELU, LIN(64), RELU, LIN(10), LSM };
  return mnist_shaped(s, sizeof s / sizeof s[0], B);
}

static gc_nn *mnist_cnn(size_t B)
{
  gc_nn_layer s[] = { CONV(32, 3, 0), RELU, CONV(64, 3, 0), RELU, POOL,
                      DROP(0.25), LIN(128), RELU, DROP(0.25), LIN(10), LSM };
  return mnist_shaped(s, sizeof s / sizeof s[0], B);
}

static gc_nn *fmnist_cnn(size_t B)
{
  gc_nn_layer s[] = { CONV(16, 5, 2), BN, RELU, POOL, CONV(32, 5, 2), BN, RELU,
                      POOL, LIN(10), LSM };
  return mnist_shaped(s, sizeof s / sizeof s[0], B);
}

/* One line per model, in the order of gc_nn_model_names: its name, the
 * data set it reads, whether a run of that data set gets it without
 * --model, and its builder.  A new model is a builder above (its layer
 * list) and a line here. */
#define GC_MODELS(X)                                                     \
  X("mnist-mlp",   "mnist",   1, mnist_mlp)                              \
  X("fmnist-mlp",  "fmnist",  1, fmnist_mlp)                             \
  X("mnist-cnn",   "mnist",   0, mnist_cnn)                              \
  X("fmnist-cnn",  "fmnist",  0, fmnist_cnn)                             \
  X("cifar-vgg19", "cifar10", 1, vgg19)

static const struct model_row {
  const char *name, *dataset;
  int dataset_default;
  gc_nn *(*build)(size_t B);
} models[] = {
#define ROW(name, dataset, dflt, build) { name, dataset, dflt, build },
  GC_MODELS(ROW)
#undef ROW
};
enum { NMODELS = sizeof models / sizeof models[0] };

static const char *const names[] = {
#define NAME(name, dataset, dflt, build) name,
  GC_MODELS(NAME)
#undef NAME
  NULL
};

static const struct model_row *model_row(const char *name)
{
  for (size_t i = 0; i < NMODELS; i++)
    if (!strcmp(models[i].name, name))
      return &models[i];
  return NULL;
}

const char *const *gc_nn_model_names(void) { return names; }

const char *gc_nn_model_dataset(const char *name)
{
  const struct model_row *m = model_row(name);
  return m ? m->dataset : NULL;
}

/* An unknown data set gets MNIST's default, as before the table. */
const char *gc_nn_model_default(const char *dataset)
{
  for (size_t i = 0; i < NMODELS; i++)
    if (models[i].dataset_default && !strcmp(models[i].dataset, dataset))
      return models[i].name;
  return models[0].name;
}

gc_nn *gc_nn_alloc_model(const char *name, size_t B)
{
  const struct model_row *m = model_row(name);
  if (m)
    return m->build(B);
  char known[256] = "";
  for (size_t i = 0, at = 0; i < NMODELS && at < sizeof known; i++)
    at += (size_t) snprintf(known + at, sizeof known - at, "%s%s",
                            i ? ", " : "", models[i].name);
  gc_errorf(__FILE__, __LINE__, GC_EINVAL, "unknown model '%s' (%s)", name,
            known);
  return NULL;
}
