// NEURON_LIBRARY(ns, m) { m.def("op", &shape_fn, "kernel_fn"); }: a library of custom operators, each a shape
// function (run while the graph compiles) and the name of its kernel function (run on the GpSimd engine).
#pragma once
#include <trnsim/registry.h>

#define NEURON_LIBRARY(ns, m)                                                                                 \
  static void trnsim_neuron_library_##ns(::trnsim::Library&);                                                 \
  static ::trnsim::LibraryRegistrar trnsim_neuron_library_registrar_##ns(#ns, &trnsim_neuron_library_##ns);   \
  static void trnsim_neuron_library_##ns(::trnsim::Library& m)
