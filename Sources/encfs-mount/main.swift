import EncFSCLI
import EncFSMountCLI

CommandLineTool.main(MountCommand.run)
