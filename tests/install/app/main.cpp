// A small application linked against an installed Kiln (find_package(Kiln)
// or pkg-config kiln): loads a model, runs it on zeros, prints each output.
//   kiln_app MODEL.onnx
#include <kiln/session.h>

#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: kiln_app MODEL.onnx\n");
    return 2;
  }
  auto session = kiln::Session::load(argv[1]);
  if (!session.ok()) {
    std::fprintf(stderr, "error: %s\n", session.status().to_string().c_str());
    return 1;
  }
  std::vector<kiln::NamedValue> inputs;
  for (const kiln::IoInfo& in : (*session)->inputs()) {
    kiln::Shape shape;
    for (int64_t d : in.dims) shape.push_back(d < 0 ? 1 : d);
    inputs.emplace_back(in.name, kiln::Tensor::zeros(in.dtype, shape));
  }
  auto outputs = (*session)->run(inputs);
  if (!outputs.ok()) {
    std::fprintf(stderr, "error: %s\n", outputs.status().to_string().c_str());
    return 1;
  }
  for (size_t i = 0; i < outputs->size(); ++i) {
    const kiln::Tensor& t = (*outputs)[i].tensor();
    std::printf("%s: %s%s\n", (*session)->outputs()[i].name.c_str(), kiln::dtype_name(t.dtype()),
                t.shape().to_string().c_str());
  }
  return 0;
}
