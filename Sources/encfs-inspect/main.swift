import EncFSCLI
#if canImport(Glibc)
import Glibc
#endif

exit(InspectCommand.run(rawArguments()))
