// A deliberate upward include, for the layer check's own test (tests/layers/CMakeLists.txt):
// checked as if this file lived in core/, which may use nothing, it must be reported.
#include "collectives/p2p.h"
