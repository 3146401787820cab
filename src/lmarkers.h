/*
** lmarkers.h -- core.event_begin, event_end, nested_enter, nested_leave,
** blocking_begin, blocking_end (the C API's markers, raising at the
** caller's line) and the brackets core.event, nested_loop and blocking.
*/
#ifndef PM_LMARKERS_H
#define PM_LMARKERS_H

#include "state.h"

/* S->brackets: the brackets' C functions, whose frames are boundaries of
** sets (hook.h's pm_hook_boundary). */
void pm_lmarkers_init (pm_State *S);
/* Adds them to the table on the top of the stack. */
void pm_lmarkers_register (lua_State *L);

#endif
