// The torch C++ API of a Neuron custom operator: the subset the Neuron custom-operator reference documents.
#pragma once
#include <trnsim/customop.h>
