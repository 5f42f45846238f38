// The whole public C++ API of asyncnd but asyncnd::dist (<asyncnd/dist.h>, in the library
// asyncnd::dist): #include <asyncnd/asyncnd.h>.
#pragma once

#include "asyncnd/autograd.h"
#include "asyncnd/device.h"
#include "asyncnd/engine.h"
#include "asyncnd/error.h"
#include "asyncnd/nn.h"
#include "asyncnd/ndarray.h"
#include "asyncnd/ops.h"
