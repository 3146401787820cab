/*
** frame.h -- the fast way from a hook event to its function and caller.
**
** The public API answers "which function does this frame run, is it a C
** function, and which frame called it?" with lua_getinfo(L, "f"),
** lua_iscfunction and lua_getstack(L, 1), whose cost is as large as the
** rest of the hook.  In Lua 5.4 a CallInfo begins with the frame's
** function slot, and its third word is the caller's CallInfo; the slot
** begins with the function's address, the value lua_topointer gives, and
** its type tag follows the value (as wide as a lua_Integer or a
** lua_Number): a function's variant bits (4 and 5) are 0 for a Lua
** function, 1 for a light C function and 2 for a C closure.  This leans
** on Lua's private layout, so pm_frame_verify checks it against the public
** API when perfmon starts, and perfmon uses the public API alone if
** anything differs.
*/
#ifndef PM_FRAME_H
#define PM_FRAME_H

#include <lua.h>

static inline const void *pm_frame_function (const void *ci) {
  return **(void *const *const *)ci;
}

/* Lua's Value, which the tag follows: as wide as a lua_Integer or a
** lua_Number, wider than a pointer on a 32-bit build. */
typedef union pm_LuaValue {
  void *p;
  lua_CFunction f;
  lua_Integer i;
  lua_Number n;
} pm_LuaValue;

static inline int pm_frame_is_c (const void *ci) {
  const unsigned char *slot = *(const unsigned char *const *)ci;
  return (slot[sizeof(pm_LuaValue)] & 0x30) != 0;
}

static inline const void *pm_frame_caller (const void *ci) {
  return ((void *const *)ci)[2];
}

/* Runs a few calls of every kind (Lua, C, C closure, tail call) under a
** test hook; returns whether the accessors agreed with the public API. */
int pm_frame_verify (lua_State *L);

/* Runs a start-up check of Lua's private layout, run (protected), with the
** thread's hook kept and put back whatever happened; raises only a memory
** error.  frame.c's check and trap.c's. */
void pm_frame_run_check (lua_State *L, lua_CFunction run);

#endif
