/*
** coroutines.h -- which coroutine runs, for a profiler without a monitor.
**
** With a monitor open the hook knows the running coroutine exactly.
** Without one, while a profiler runs, coroutine.resume and coroutine.wrap
** are replaced by functions that tell it (P->running), so that the signal
** handler asks that coroutine for the sample.  A coroutine resumed by C
** code, or through a resume saved before start(), is not tracked: its
** samples land in its resumer when it yields (docs/profiler.md).  The
** replacements are made in the profiler's anchor (profiler.h) before
** anything changes, so that putting them in and taking them out allocates
** nothing.
*/
#ifndef PM_COROUTINES_H
#define PM_COROUTINES_H

#include "profiler.h"

/* Makes our resume and wrap into the anchor (at index anchor), with the
** library and the originals they stand for: what the library will hold
** once `other` (the profiler running, at index other, or 0) is stopped.
** Allocates, and changes nothing outside the anchor. */
void pm_coroutines_prepare (lua_State *L, pm_State *S, int anchor, int other);
/* Puts ours in the library where the originals are. */
void pm_coroutines_patch (lua_State *L, int anchor);
/* Puts the originals back where ours still are. */
void pm_coroutines_unpatch (lua_State *L, int anchor);

#endif
