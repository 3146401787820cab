/*
** watch.h -- the wrapped allocator that keeps address keys honest.
**
** perfmon caches what it learned about Lua objects (functions, threads,
** environment tables, chunk source strings) under their addresses.  Lua
** reuses the memory of collected objects, so an address alone could make a
** new plugin's function inherit a dead plugin's groups.  perfmon therefore
** wraps the state's allocator: when Lua frees a block that is a key in
** S->e.fns or S->e.known, the entry is dropped before the memory can be
** handed out again.
*/
#ifndef PM_WATCH_H
#define PM_WATCH_H

#include "state.h"

/* Installs the wrapper and proves, with a full collection, that frees of
** tables, closures, threads and strings are seen at the addresses perfmon
** keys them by.  Returns 1 when they are, 0 when they are not and -1 when
** memory ran out; then nothing is left installed or allocated.  May raise
** a memory error, before it installs anything. */
int pm_watch_open (lua_State *L, pm_State *S);
void pm_watch_close (lua_State *L, pm_State *S);
/* The state whose wrapper is L's allocator, or NULL: found without the
** registry lookup, for the hook's coroutine switches. */
pm_State *pm_watch_state (lua_State *L);

/* The address perfmon keys a thread by: the start of its block. */
#define pm_thread_key(L) ((const void *)lua_getextraspace(L))

#endif
