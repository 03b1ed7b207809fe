/*
 * rgasnet-conduit: public helper header of the core (nothing conduit-specific
 * beyond GASNet's generic helpers). Part of the rgasnet project.
 */

#ifndef _IN_GASNETEX_H
  #error gasnet_core_help.h is internal: include gasnetex.h instead
#endif

#ifndef _GASNET_CORE_HELP_H
#define _GASNET_CORE_HELP_H

#include <gasnet_help.h>

#endif
