/*
** trap.h -- setting a thread's hook without walking its stack.
**
** lua_sethook marks every Lua frame of the thread to look at the hook
** (settraps in ldebug.c), so asking for a count event costs in proportion
** to the stack's depth: a sample request from the profiler's signal
** handler in a 190,000-frame recursion walks 190,000 frames.  A count event
** at the next instruction needs the mark on the top Lua frame only: the
** frames below look at their own mark again when they run on (a return
** ends in one of them with the hook still set).  pm_trap_sethook writes
** the hook fields of lua_State and that one mark directly, as lua_sethook
** would have, through Lua 5.4's private layout; pm_trap_verify checks that
** layout against the public API and against a count event it asks for,
** when perfmon starts, and perfmon calls lua_sethook instead if anything
** differs.
*/
#ifndef PM_TRAP_H
#define PM_TRAP_H

#include <lua.h>

/* Returns whether the layout holds in this Lua (1) or not (0); raises only
** a memory error. */
int pm_trap_verify (lua_State *L);

/* lua_sethook(L, h, mask, count) for perfmon's own hooks (call, return,
** count; never line): direct when `direct` (a verified layout), else
** through lua_sethook.  Async-signal-safe, as lua_sethook is. */
void pm_trap_sethook (lua_State *L, lua_Hook h, int mask, int count,
                      int direct);

/* The chain of resumes from L (the main thread): L, the coroutine it
** resumes, the one that resumes, and so on, PM_TRAP_CHAIN at most; returns
** how many, at least 1, the last the one that runs.  A frame resumes a
** coroutine when it runs f[0] (coroutine.resume: its first argument) or
** f[1] or f[2] (a function coroutine.wrap made, or the profiler's: its
** first upvalue).  Through Lua 5.4's private layout; async-signal-safe.
** pm_trap_chain_verify checks it against real resumes and wraps, once,
** at start-up (0: use the public API instead). */
#define PM_TRAP_CHAIN 64
int pm_trap_chain (lua_State *L, const lua_CFunction f[3],
                   lua_State *chain[PM_TRAP_CHAIN]);
int pm_trap_chain_verify (lua_State *L, const lua_CFunction f[3]);

#endif
