#include <pmix.h>
