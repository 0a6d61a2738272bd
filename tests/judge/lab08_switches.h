/* lab08_switches.h: the judge test's case of the planner's switches (handout section 3.3),
 * included by 08-placement.c after its helpers (one translation unit, as testing.h's
 * counters want). */
/* The switches' memory test (op "switches"): the kit's figures pass; a model state that
 * ignores fp32 is told the bytes fp32 holds, the case with its switches, and what each
 * switch changes. */
static void switches(void)
{
    struct gr_why why;
    struct pl_plan_model m;
    struct pl_plan_cluster c;
    char want[1024];
    where("llama3-8b", "dgx-h100", 1, 8, "tp=4,pp=2,dp=1,micro=1,m=8,fp32=1,no_dropout=1,"
          "vocab_whole=1", &m, &c);
    ob.op = L8_OP_SWITCHES;
    ob.mem_ref = (struct pl_plan_memory){.params = 8e9, .grads = 8e9, .optim = 16e9,
                                         .activ = 20e9, .total = 52e9, .activ_layer = 300e6,
                                         .in_flight = 2, .layers_stage = 16};
    ob.mem = ob.mem_ref;
    CHECK(judge(L8_OP_SWITCHES, "correct", &why) && why.n == 0, "the kit's figures pass: %s",
          first(&why));
    ob.mem.params = 4e9;
    snprintf(want, sizeof want, "parameters: yours %.4g GB, the kit's %.4g GB (within 1%%): "
             "what the first stage keeps of its fp32 parameters, the embedding whole on every "
             "tp rank under vocab_whole, and whether ZeRO-0 divides it", 4.0, 8.0);
    CHECK(!judge(L8_OP_SWITCHES, "correct", &why) && why.n == 3 &&
          !strncmp(first(&why), want, strlen(want)), "fp32's params: %s", first(&why));
    in_line(1, "", want, sizeof want);
    CHECK(!strcmp(why.line[1], want) && strstr(want, "| fp32 no-dropout vocab-whole") &&
          said(&why, "this configuration's switches (section 3.3) change what is kept"),
          "the case and the switches: %s", why.line[1]);
}
