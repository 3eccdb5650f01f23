#include "vmm/resync.h"
#include "vmm/vmm.h"

/* Until the guest agent's protocol is linked in, a restored VM is ready as
 * soon as it runs; see resync.h for what this step will do. */
void resync_start(struct vm *vm)
{
	vm_set_ready(vm);
}
