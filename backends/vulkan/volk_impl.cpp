// volk's loader, compiled into ember_vulkan (Debian's libvulkan-volk-dev ships only the source).
// VK_NO_PROTOTYPES is defined for the whole target: nothing links libvulkan; volkInitialize
// dlopen()s the loader at run time.
#include <volk.c>  // NOLINT(bugprone-suspicious-include)
