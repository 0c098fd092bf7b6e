import EncFSCLI
#if canImport(Glibc)
import Glibc
#endif

exit(MountCommand.run(rawArguments()))
