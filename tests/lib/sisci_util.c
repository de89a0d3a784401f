/*
 * Bodies of the test helpers declared in sisci_util.h (what that header says).
 */
#include "sisci_util.h"

struct fx FX;

int sisci_setup(void **state, const char *test)
{
    static const struct fx_opts o = { .topo = "examples/topologies/smartio3.ini", .add = { "nvme0" } };
    return fx_setup(state, &FX, test, &o);
}

sci_desc_t sci_start(void)
{
    sci_desc_t sd;
    SCI_OK(SCIInitialize(0, &err));
    SCI_OK(SCIOpen(&sd, 0, &err));
    return sd;
}

void sci_end(sci_desc_t sd)
{
    SCI_OK(SCIClose(sd, 0, &err));
    SCITerminate();
}
