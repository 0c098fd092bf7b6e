import EncFSCLI

CommandLineTool.main(MountCommand.run)
