// libbraid.so's own translation unit: every symbol comes from the layer archives linked whole
// (packaging/CMakeLists.txt); this file only gives the shared library target a source.
#include "braid/braid.h"
