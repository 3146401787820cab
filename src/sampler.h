/*
** sampler.h -- asking Lua for samples: the timer, its signal, the hook.
**
** A one-shot POSIX timer sends SIGPROF to the thread that started the
** profiler: after a period of wall time ("precise"), or at the first
** scheduler tick after a period of the thread's CPU time ("tick"; see
** timer_clock); the handler arms it again, later than a period when the
** profiler's own cost was high (rearm), so that it never starves the
** program.
** Either way the handler only counts the whole periods of the thread's
** CPU time and asks Lua for a sample by setting a count hook of 1 on the
** coroutine that runs and on the main thread (lua_sethook may be called
** from a signal handler: ldebug.c says so, and lua.c stops a script on
** Ctrl-C that way; trap.h does what it does without walking the stack).  The sample is taken at the next instruction, in the
** hook, at a safe point, by profiler.c.
**
** One hook serves the profiler and the monitor: while a monitor is open the
** count request rides on the monitor's call/return hook, which hands count
** events to pm_sampler_hook; otherwise the profiler sets its own hook for
** the one event.  Everything the signal handler touches is here, in the
** fields of pm_Profiler marked for it, and in the lua_State hook fields.
*/
#ifndef PM_SAMPLER_H
#define PM_SAMPLER_H

#include "state.h"

/* Creates and arms P's timer, on the clock P->timer says, every
** P->period_ns; returns an error message, or NULL. */
const char *pm_sampler_start (pm_Profiler *P);
/* Deletes P's timer: no handler uses P afterwards, and no tick of it can
** meet SIGPROF's default action.  From any thread. */
void pm_sampler_stop (pm_Profiler *P);
/* Takes back a count request on L, keeping the monitor's hook. */
void pm_sampler_unrequest (pm_State *S, lua_State *L);

/* The hook the profiler puts on a thread that has none, for one count
** event; the monitor's hook (hook.c) hands its count events here too. */
void pm_sampler_hook (lua_State *L, lua_Debug *ar);

/* lua_sethook for hook.c: keeps a sample the profiler asked for on L (a
** count mask of 1) when the monitor installs or removes its hook. */
void pm_sampler_sethook (pm_State *S, lua_State *L, lua_Hook h, int mask,
                         int count);

#endif
