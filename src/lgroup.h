/*
** lgroup.h -- core.group, attach, detach, attach_source, detach_source,
** chunk, is_group: groups and what belongs to them, from Lua; the group
** userdata ("perfmon.group"), whose finalizer lets go of its group.
*/
#ifndef PM_LGROUP_H
#define PM_LGROUP_H

#include <lua.h>

/* Adds them to the table on the top of the stack. */
void pm_lgroup_register (lua_State *L);

#endif
