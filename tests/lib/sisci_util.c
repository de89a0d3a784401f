/*
 * Bodies of the test helpers declared in sisci_util.h (what that header says).
 */
#include "sisci_util.h"

char FAB[64];

int sisci_up(const char *test)
{
    snprintf(FAB, sizeof FAB, "%s", h_fabric_name(test));
    if (h_up(FAB, "examples/topologies/smartio3.ini"))
        return -1;
    return h_cli(FAB, "device add nvme0 >/dev/null");
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
