// The selector runs no topology detection (the communicator hands it the host view), for the layer
// check's own test (tests/layers/CMakeLists.txt): checked as if this file lived in
// collectives/selector/, it must be reported.
#include "topology/detect.h"
