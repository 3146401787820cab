/*
** sampler.h -- asking Lua for samples: the timer and its signal.
**
** A one-shot POSIX timer sends SIGPROF to the thread that started the
** profiler: after a period of wall time ("precise"), or at the first
** scheduler tick after a period of the thread's CPU time ("tick"; see
** timer_clock); the handler arms it again, later than a period when the
** profiler's own cost was high (rearm), so that it never starves the
** program.  Either way the handler only counts the whole periods of the
** thread's CPU time and asks the hook for a count event at the next
** instruction of the coroutine that runs and of the main thread
** (pm_hook_request, async-signal-safe as lua_sethook is: ldebug.c says so,
** and lua.c stops a script on Ctrl-C that way).  The hook answers at that
** safe point by calling pm_sampler_answer, which takes the sample.
** Everything the signal handler touches is here, in the fields of
** pm_Profiler marked for it, and in the lua_State hook fields.
*/
#ifndef PM_SAMPLER_H
#define PM_SAMPLER_H

#include "profiler.h"

/* Creates and arms P's timer, on the clock P->timer says, every
** P->period_ns; returns an error message, or NULL. */
const char *pm_sampler_start (pm_Profiler *P);
/* Deletes P's timer: no handler uses P afterwards, and no tick of it can
** meet SIGPROF's default action.  From any thread. */
void pm_sampler_stop (pm_Profiler *P);
/* The count event the timer asked for, on L: the hook's S->answer. */
void pm_sampler_answer (pm_Profiler *P, lua_State *L);

#endif
