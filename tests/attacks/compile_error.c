
/* Hygiene (appended to the stub): a file that does not compile. */
static int broken = ;
