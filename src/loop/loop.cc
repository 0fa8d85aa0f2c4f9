#include "loop/loop.h"
