/*
** largs.h -- what every binding of perfmon.core checks first: that the
** state is open, and its arguments, with errors that name the public
** function the user called (perfmon.group), never the name Lua finds.
*/
#ifndef PM_LARGS_H
#define PM_LARGS_H

#include "state.h"

/* The state, or an error when it is closing. */
pm_State *pm_lstate (lua_State *L);
/* Raises "not enough memory"; returns NULL for the caller's convenience. */
void *pm_lnomem (lua_State *L);
/* An argument error that names fname. */
int pm_larg_error (lua_State *L, int arg, const char *fname, const char *msg);
/* Argument arg is of type t, never converted (a number is no string). */
void pm_lcheck_type (lua_State *L, int arg, const char *fname, int t);
/* Pushes the value at idx quoted, for a message, and returns it. */
const char *pm_lpush_quoted (lua_State *L, int idx);
/* Every key of the option table at 1 is one of fields (NULL-ended) or,
** with npos > 0, an integer in [1, npos]. */
void pm_lcheck_fields (lua_State *L, const char *fname,
                       const char *const *fields, lua_Integer npos);

#endif
