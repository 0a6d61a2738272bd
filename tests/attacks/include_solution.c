/* Attack 1: the whole submission is the shipped solution, included by path. */
#include "../../solutions/01-collectives/collectives.c"
