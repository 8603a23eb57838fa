/* placeholder while building */
#include "apps/replay.h"
int replay_layer(replay *r)
{
    (void)r;
    return -1;
}
