/*
** profiler.h -- the sampling profiler (perfmon.profiler).
**
** The stopwatch says which group is slow; the sampler says which function.
** A timer signal, directed at the Lua thread, only counts a period and asks
** Lua for a sample by setting a count hook of 1 on the coroutine that runs
** (lua_sethook may be called from a signal handler: ldebug.c says so, and
** lua.c stops a script on Ctrl-C that way).  The sample is taken at the
** next instruction, in the hook, at a safe point: the stack is walked with
** lua_getstack/lua_getinfo into preallocated buffers, functions and stacks
** are interned (a stack is a node of one trie: its parent, its function,
** its line), and the sample is stored in a ring.
**
** One hook serves the profiler and the monitor: while a monitor is open the
** count request rides on the monitor's call/return hook, which hands count
** events here; otherwise the profiler sets its own hook for the one event.
*/
#ifndef PM_PROFILER_H
#define PM_PROFILER_H

#include "state.h"

/* The hook the profiler puts on a thread that has none, for one count
** event; the monitor's hook hands its count events here too. */
void pm_profiler_hook (lua_State *L, lua_Debug *ar);

/* lua_sethook for hook.c: keeps a sample the profiler asked for on L (a
** count mask of 1) when the monitor installs or removes its hook. */
void pm_profiler_sethook (pm_State *S, lua_State *L, lua_Hook h, int mask);

/* Adds core.profiler_new to the table on the top of the stack. */
void pm_profiler_register (lua_State *L);

#endif
